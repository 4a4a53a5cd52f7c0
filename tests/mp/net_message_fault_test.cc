// The link under the net transport's messages fails, host space, 2 ranks as 2 nodes in network
// namespaces of their own joined by 3 veth rails (scripts/netns-rails, as root). Rank 1 sends
// rank 0 a stream of messages: put-signals of 64 bytes (one message each: the payload and a
// signal that adds 1), not waited for, 40 at a time, and between them fetch-adds of 1, which
// it waits for. Its messages go on its lane 0,
// from its rail 0 to rank 0's rail 1 (rails/lanes.h), which the kernel routes over the link
// rail1; rank 1 sets that link down under the stream (`ip link set rail1 down` in its
// namespace): tcp then stalls without an error, so the transport must notice the stall
// (SYMCOMM_NET_RAIL_TIMEOUT), close both ends of the connection and send every message not
// known to be applied again on another lane, where rank 0 applies each exactly once, in order.
// Run under `symrun --keep-going -n 2 --nodes 2 --netns A,B mp_net_link_fault SCENARIO`:
//
// messages-down  the link goes down 300 ms into the stream and stays down; the stream goes on
//                for 3 s more.
// messages-flap  the link goes down 300 ms into the stream and comes back 2 s later; the
//                stream goes on for 3 s more (packets the stalled connection held may arrive
//                then: both ends were closed, and a replay would be dropped anyway).
//
// Checked: fetch-add i found exactly i (each applied once, in order); at the end rank 0's
// signal word and atomic word both equal the number of messages of each kind, and its slots
// hold the last put-signals' payloads; no call took 10 s or more; rank 1's transport warned
// that the lane failed under its messages (else the failure hit nothing and proved nothing).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net_fault_helpers.h"
#include "symcomm/symcomm.h"

namespace {

using namespace net_fault;

constexpr size_t kSlotBytes = 64;
constexpr size_t kSlots = 256;

int run(const std::string& s, int rank) {
  const char* env = std::getenv("SYMCOMM_NET_RAILS");
  if (!env || std::string(env).find("rail2") == std::string::npos) {
    std::printf("SKIP: %s needs three rails (SYMCOMM_NET_RAILS=rail0,rail1,rail2)\n", s.c_str());
    return 77;
  }
  const bool flap = s == "messages-flap";
  {
    std::ofstream retries("/proc/sys/net/ipv4/tcp_retries2");
    retries << "5\n";
  }
  // Rank 1 keeps the transport's log in a file, to count its lines.
  LogCapture capture;
  if (rank == 1 && !capture.start("message_fault")) return fail(s, rank, "cannot redirect stderr");
  std::thread flapper;
  auto failing = [&](const std::string& why) {
    if (flapper.joinable()) flapper.join();
    const std::string said = capture.finish();
    if (!said.empty()) std::fprintf(stderr, "%s", said.c_str());
    if (rank == 1) link("rail1", true);
    return fail(s, rank, why);
  };

  symcommResult_t rc;
  symcommComm_t comm = init(&rc);
  if (!comm) return failing(symcommGetLastError());
  uint64_t* words = nullptr;  // [0]: the put-signals' signal, [1]: the fetch-adds' word
  char* slots = nullptr;
  if (symcommCalloc(comm, 2, sizeof(uint64_t), reinterpret_cast<void**>(&words)) !=
          symcommSuccess ||
      symcommMalloc(comm, kSlots * kSlotBytes, reinterpret_cast<void**>(&slots)) != symcommSuccess)
    return failing(symcommGetLastError());
  if (symcommHostBarrier(comm) != symcommSuccess) return failing(symcommGetLastError());

  uint64_t puts = 0, adds = 0;
  double slowest = 0;
  if (rank == 1) {
    std::atomic<bool> down{false}, back{false};
    std::atomic<double> changed_at{0};
    const auto start = Clock::now();
    flapper = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (!link("rail1", false)) std::printf("ip link set rail1 down failed\n");
      changed_at.store(since(start));
      down.store(true);
      if (!flap) return;
      std::this_thread::sleep_for(std::chrono::seconds(2));
      if (!link("rail1", true)) std::printf("ip link set rail1 up failed\n");
      changed_at.store(since(start));
      back.store(true);
    });
    std::vector<char> payload(kSlotBytes);
    for (uint64_t i = 0;; ++i) {
      const bool done = (flap ? back.load() : down.load()) && since(start) > changed_at + 3;
      if (done || since(start) > 40) break;
      const auto call = Clock::now();
      if (i % 41 != 40) {  // 40 put-signals (not waited for), then a fetch-add
        for (size_t b = 0; b < kSlotBytes; ++b) payload[b] = static_cast<char>(byte_of(puts, b));
        if (symcommPutSignalOnStream(comm, slots + (puts % kSlots) * kSlotBytes, payload.data(),
                                     kSlotBytes, &words[0], 1, symcommSignalAdd, 0,
                                     symcommEngineAuto, nullptr) != symcommSuccess)
          return failing("put-signal " + std::to_string(puts) + ": " + symcommGetLastError());
        ++puts;
      } else {
        uint64_t found = ~0ull;
        if (symcommAtomicFetchAddOnStream(comm, &words[1], 1, 0, &found, nullptr) !=
            symcommSuccess)
          return failing("fetch-add " + std::to_string(adds) + ": " + symcommGetLastError());
        if (found != adds)
          return failing("fetch-add " + std::to_string(adds) + " found " +
                         std::to_string(found) + " (applied twice, or one lost)");
        ++adds;
      }
      slowest = std::max(slowest, since(call));
    }
    if (symcommQuietOnStream(comm, nullptr) != symcommSuccess)
      return failing(std::string("quiet: ") + symcommGetLastError());
    flapper.join();
  }
  uint64_t counts[2] = {puts, adds};
  if (symcommHostBroadcast(comm, counts, sizeof counts, 1) != symcommSuccess)
    return failing(symcommGetLastError());
  if (symcommHostBarrier(comm) != symcommSuccess) return failing(symcommGetLastError());
  if (rank == 0) {
    if (words[0] != counts[0] || words[1] != counts[1])
      return fail(s, rank, "the signal word holds " + std::to_string(words[0]) + " of " +
                               std::to_string(counts[0]) + " put-signals, the atomic word " +
                               std::to_string(words[1]) + " of " + std::to_string(counts[1]) +
                               " fetch-adds");
    for (uint64_t k = counts[0] > kSlots ? counts[0] - kSlots : 0; k < counts[0]; ++k)
      for (size_t b = 0; b < kSlotBytes; ++b)
        if (static_cast<uint8_t>(slots[(k % kSlots) * kSlotBytes + b]) != byte_of(k, b))
          return fail(s, rank, "put-signal " + std::to_string(k) + "'s payload differs");
    std::printf("%s: %llu put-signals and %llu fetch-adds applied once each\n", s.c_str(),
                static_cast<unsigned long long>(counts[0]),
                static_cast<unsigned long long>(counts[1]));
  }
  if (symcommHostBarrier(comm) != symcommSuccess) return failing(symcommGetLastError());
  symcommFinalize(comm);
  if (rank == 1) link("rail1", true);
  const std::string said = capture.finish();
  if (rank == 1) {
    const bool failed_over = said.find("failed under its messages") != std::string::npos;
    std::printf("%s: slowest call %.2f s; the lane failed under the messages: %s\n", s.c_str(),
                slowest, failed_over ? "yes" : "no");
    if (std::getenv("SYMCOMM_TEST_SHOW_LOG")) std::fprintf(stderr, "%s", said.c_str());
    if (!failed_over) {
      std::fprintf(stderr, "%s", said.c_str());
      return fail(s, rank, "the link's failure hit no message");
    }
    if (slowest >= 10) return fail(s, rank, "a call took " + std::to_string(slowest) + " s");
  }
  return 0;
}

}  // namespace

namespace net_fault {
int run_messages(const std::string& scenario, int rank) { return run(scenario, rank); }
}  // namespace net_fault
