// A rail whose link fails under the net transport, host space, 2 ranks as 2 nodes in network
// namespaces of their own joined by veth rails (scripts/netns-rails, as root). Rank 0 puts
// 64 MiB to rank 1 and gets 64 MiB from it, striped over the rails, round after round; in
// some rounds it sets the last rail's link down in its namespace under the call
// (`ip link set DEV down`): tcp then stalls without an error, so the transport must notice
// the stall (SYMCOMM_NET_RAIL_TIMEOUT), close both ends of the stalled connections and send
// their pieces again on the other rails. (messages-down and messages-flap, the same under
// the messages: net_message_fault_test.cc.) Run under
// `symrun --keep-going -n 2 --nodes 2 --netns A,B mp_net_link_fault SCENARIO`:
//
// link-down   the link goes down in round 1 and stays down: every put and get completes,
//             whole, each within the bound below; rounds after the failure no longer wait
//             for the dead rail (each within twice the rail timeout); the transport warned.
// link-flap   in every other round the link goes down under the put and comes back 2 s
//             later. After each put, rank 0 at once puts other bytes to the same place, and
//             after each get overwrites what it got; 3 s after the link is back, those newer
//             bytes must still be there: nothing the stalled connection held lands late
//             (both of its ends were closed). At the end the rail is back: every lane to
//             rank 1 is up again (symcommPeerNetLanes) and a last put lands whole.
//
// Three rails or more: between 2 ranks on 2 rails, a link down would cut one rank's lane 0
// (lanes.h: rank 1's goes from its rail 0 to rank 0's rail 1), which carries the messages;
// with three, the last rail carries data lanes only. Each rank lowers tcp_retries2 in its own
// namespace (the test's, deleted after it), as the fault cases do, so that the
// connections left on the dead link give up within seconds.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "net_fault_helpers.h"
#include "symcomm/symcomm.h"

namespace {

using namespace net_fault;

void fill(std::vector<char>& v, uint64_t what) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>(byte_of(what, i));
}
// The first index where `p` differs from pattern `what`, or -1.
long mismatch(const char* p, size_t bytes, uint64_t what) {
  for (size_t i = 0; i < bytes; ++i)
    if (static_cast<uint8_t>(p[i]) != byte_of(what, i)) return static_cast<long>(i);
  return -1;
}

int run(const std::string& s, int rank) {
  const char* env = std::getenv("SYMCOMM_NET_RAILS");
  const std::string list = env ? env : "";
  std::vector<std::string> rails;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) rails.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  if (rails.size() < 3) {
    std::printf("SKIP: %s needs three rails or more (SYMCOMM_NET_RAILS)\n", s.c_str());
    return 77;
  }
  const std::string dev = rails.back();
  const char* timeout_env = std::getenv("SYMCOMM_NET_RAIL_TIMEOUT");
  const double rail_timeout = (timeout_env ? std::atof(timeout_env) : 2000.0) / 1000.0;
  {
    std::ofstream retries("/proc/sys/net/ipv4/tcp_retries2");
    retries << "5\n";
  }
  // Rank 0 keeps the transport's log in a file, to count its lines.
  LogCapture capture;
  if (rank == 0 && !capture.start("link_fault")) return fail(s, rank, "cannot redirect stderr");
  std::thread flapper;  // sets the link down (and, flapping, up again)
  auto failing = [&](const std::string& why) {
    if (flapper.joinable()) flapper.join();
    const std::string said = capture.finish();
    if (!said.empty()) std::fprintf(stderr, "%s", said.c_str());
    link(dev, true);
    return fail(s, rank, why);
  };

  symcommResult_t rc;
  symcommComm_t comm = init(&rc);
  if (!comm) return failing(symcommGetLastError());
  constexpr size_t kBytes = 64 << 20;
  constexpr int kRounds = 6;
  const bool flap = s == "link-flap";
  char* slot = nullptr;
  char* source = nullptr;
  if (symcommMalloc(comm, kBytes, reinterpret_cast<void**>(&slot)) != symcommSuccess ||
      symcommMalloc(comm, kBytes, reinterpret_cast<void**>(&source)) != symcommSuccess)
    return failing(symcommGetLastError());
  std::vector<char> src(kBytes), newer(kBytes), got(kBytes);
  auto barrier = [&] { return symcommHostBarrier(comm) == symcommSuccess; };
  // A call on rank 0, with the link set down 50 ms into it where `cut`.
  auto timed = [&](bool cut, const std::function<symcommResult_t()>& call, double* took) {
    if (cut) {
      if (flapper.joinable()) flapper.join();
      flapper = std::thread([&, flap] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!link(dev, false)) std::printf("ip link set %s down failed\n", dev.c_str());
        if (!flap) return;
        std::this_thread::sleep_for(std::chrono::seconds(2));
        if (!link(dev, true)) std::printf("ip link set %s up failed\n", dev.c_str());
      });
    }
    const auto start = Clock::now();
    const symcommResult_t r = call();
    *took = since(start);
    return r == symcommSuccess ? std::string() : std::string(symcommGetLastError());
  };
  double slowest_after = 0;  // link-down: the slowest call of the rounds after the failure
  for (int k = 0; k < kRounds; ++k) {
    const bool cut = flap ? k % 2 == 1 : k == 1;
    std::memset(slot, 0, kBytes);
    if (rank == 1) {
      std::vector<char> v(kBytes);
      fill(v, k + 101);
      std::memcpy(source, v.data(), kBytes);
    }
    if (!barrier()) return failing(symcommGetLastError());
    if (rank == 0) {
      fill(src, k + 1);
      fill(newer, k + 51);
      double took = 0;
      std::string why = timed(cut, [&] {
        return symcommPutOnStream(comm, slot, src.data(), kBytes, 1, symcommEngineAuto, nullptr);
      }, &took);
      if (!why.empty()) return failing("put " + std::to_string(k) + " failed: " + why);
      if (took > 30) return failing("put " + std::to_string(k) + " took " + std::to_string(took) + " s");
      if (!flap && k > 1) slowest_after = std::max(slowest_after, took);
      if (flap) {
        // Newer bytes over the same place: what the stalled connection held must not land
        // over them later.
        if (symcommPutOnStream(comm, slot, newer.data(), kBytes, 1, symcommEngineAuto,
                               nullptr) != symcommSuccess)
          return failing(std::string("the newer put failed: ") + symcommGetLastError());
      }
    }
    if (!barrier()) return failing(symcommGetLastError());
    if (rank == 0) {
      std::memset(got.data(), 0, kBytes);
      double took = 0;
      std::string why = timed(cut && !flap, [&] {
        return symcommGetOnStream(comm, got.data(), source, kBytes, 1, symcommEngineAuto,
                                  nullptr);
      }, &took);
      if (!why.empty()) return failing("get " + std::to_string(k) + " failed: " + why);
      if (!flap && k > 1) slowest_after = std::max(slowest_after, took);
      const long at = mismatch(got.data(), kBytes, k + 101);
      if (at >= 0) return failing("get " + std::to_string(k) + " differs at byte " + std::to_string(at));
      if (flap) fill(got, k + 201);  // a late answer of the stalled read would land here
    }
    if (flap && cut) {
      // The link is back 2 s after it went down; 3 s more for anything left to arrive.
      if (rank == 0 && flapper.joinable()) flapper.join();
      std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    if (!barrier()) return failing(symcommGetLastError());
    if (rank == 1) {
      const long at = mismatch(slot, kBytes, flap ? k + 51 : k + 1);
      if (at >= 0)
        return fail(s, rank, "round " + std::to_string(k) + ": the slot differs at byte " +
                                 std::to_string(at) + (flap ? " (older bytes landed late?)" : ""));
    }
    if (rank == 0 && flap) {
      const long at = mismatch(got.data(), kBytes, k + 201);
      if (at >= 0)
        return failing("round " + std::to_string(k) + ": a late answer overwrote the get's "
                       "buffer at byte " + std::to_string(at));
    }
    if (!barrier()) return failing(symcommGetLastError());
  }
  if (flapper.joinable()) flapper.join();
  if (rank == 0 && !flap && slowest_after > 2 * rail_timeout)
    return failing("after the link went down a call still took " + std::to_string(slowest_after) +
                   " s (the rail timeout is " + std::to_string(rail_timeout) + " s)");
  if (flap) {
    // The rail comes back: transfers probe it; every lane up within 40 s.
    bool all_up = rank != 0;
    for (int i = 0; i < 80 && !all_up; ++i) {
      fill(src, 500 + i);
      if (symcommPutOnStream(comm, slot, src.data(), 4 << 20, 1, symcommEngineAuto, nullptr) !=
          symcommSuccess)
        return failing(std::string("a put after the flaps: ") + symcommGetLastError());
      symcommNetLane_t lanes[16];
      int count = 0;
      if (symcommPeerNetLanes(comm, 1, lanes, 16, &count) != symcommSuccess)
        return failing(symcommGetLastError());
      all_up = count >= 3;
      for (int l = 0; l < count; ++l) all_up = all_up && lanes[l].up;
      if (!all_up) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!all_up) return failing("a lane to rank 1 stayed down after the link came back");
    if (!barrier()) return failing(symcommGetLastError());
    if (rank == 0) {
      fill(src, 999);
      if (symcommPutOnStream(comm, slot, src.data(), kBytes, 1, symcommEngineAuto, nullptr) !=
          symcommSuccess)
        return failing(std::string("the last put: ") + symcommGetLastError());
    }
    if (!barrier()) return failing(symcommGetLastError());
    if (rank == 1 && mismatch(slot, kBytes, 999) >= 0)
      return fail(s, rank, "the last put did not land whole");
  }
  symcommFinalize(comm);
  link(dev, true);
  const std::string said = capture.finish();
  if (rank == 0) {
    const int failed = occurrences(said, "goes again on the other lanes");
    const bool stalled = said.find("stalled") != std::string::npos;
    std::printf("%s: %d pieces went again on the other rails (%s); slowest call after the "
                "failure %.2f s; the lane came back: %s\n", s.c_str(), failed,
                stalled ? "a stall noticed" : "no stall", slowest_after,
                said.find("is back up") != std::string::npos ? "yes" : "no");
    if (failed == 0) {
      std::fprintf(stderr, "%s", said.c_str());
      return fail(s, rank, "no piece went again: the link's failure hit no transfer");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const char* r = std::getenv("SYMCOMM_RANK");
  if (!r) return fail(scenario, -1, "run under symrun");
  const bool messages = scenario == "messages-down" || scenario == "messages-flap";
  if (scenario != "link-down" && scenario != "link-flap" && !messages) {
    std::fprintf(stderr, "usage: mp_net_link_fault "
                         "link-down|link-flap|messages-down|messages-flap\n");
    return 2;
  }
  if (std::system("ip -V >/dev/null 2>&1") != 0) {
    std::printf("SKIP: %s needs ip (iproute2) to set a link down\n", scenario.c_str());
    return 77;
  }
  return messages ? run_messages(scenario, std::atoi(r)) : run(scenario, std::atoi(r));
}
