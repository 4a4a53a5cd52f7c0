// Faults of the net transport, host space, ranks formed into nodes by `symrun --nodes`
// (every peer of another node reached over the network). Run as every rank under
// `symrun --keep-going -n N --nodes N mp_net_fault SCENARIO`:
//
// dies-during-put      the last rank dies while rank 0 streams 64 MiB puts to it (and the
//                      others wait for a signal): rank 0's put in flight (or the next) fails
//                      with symcommPeerLost within the peer timeout, and nothing hangs.
// dies-during-barrier  the last rank dies while the others wait in a barrier of the world
//                      that crosses nodes: symcommPeerLost within the bound.
// dies-during-coll     the last rank dies while the others run all-reduces of the world
//                      across nodes by the automatic choice, the algorithm that runs across
//                      nodes (hier; checked): symcommPeerLost within the bound.
// connection-cut       (needs ss from iproute2; exit code 77 without it)
//                      rank 0 puts 64 MiB to rank 1, round after round, and in some rounds
//                      destroys the network transport's TCP connections of its process under
//                      the put (ss -K): each put either completes or fails with
//                      symcommPeerLost, none hangs, every put that reported success has
//                      landed (rank 1 checks each), and later puts work again.
// rail-cut             (two rails or more, SYMCOMM_NET_RAILS; needs ss; exit code 77 without
//                      either) rank 0 puts 64 MiB to rank 1, striped over the rails, round
//                      after round, and in some rounds destroys its connections on the second
//                      rail (ss -K src ADDRESS) under the put, then likewise under a get of
//                      64 MiB from rank 1: every put and get completes (the pieces on the cut
//                      rail go again on the others), each landed whole, and the transport said
//                      so (its warning naming the failed rail); a second later the rail is
//                      tried again, and a last put lands whole.
// no-libfabric         SYMCOMM_FABRIC_LIBRARY names no library: init fails on every rank with
//                      symcommNotSupported naming it, where a peer needs the network; on one
//                      node (no such peer) init succeeds.
// unknown-provider     SYMCOMM_NET_PROVIDER names no provider: init fails on every rank,
//                      naming it.
//
// The victim of the dies-* scenarios forks: its child plays the victim and the parent exits
// 0 once the child is gone, so that symrun's exit code says whether the survivors passed.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coll_caps.h"
#include "net_fault_helpers.h"
#include "symcomm/symcomm.h"

namespace {

using namespace net_fault;

// The process's TCP connections to loopback, as "local port" numbers (ss, this pid).
std::set<std::string> my_connections() {
  std::set<std::string> ports;
  const std::string cmd = "ss -tnpH state established 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return ports;
  char line[1024];
  const std::string pid = "pid=" + std::to_string(getpid()) + ",";
  while (fgets(line, sizeof line, f)) {
    std::string l = line;
    if (l.find(pid) == std::string::npos) continue;
    // Recv-Q Send-Q Local:Port Peer:Port ...
    char local[256] = {0};
    if (std::sscanf(l.c_str(), "%*s %*s %255s", local) != 1) continue;
    std::string s = local;
    ports.insert(s.substr(s.rfind(':') + 1));
  }
  pclose(f);
  return ports;
}

int dies(const std::string& scenario, int rank, int nranks) {
  const int victim = nranks - 1;
  // The calls' agreement checks off: the victim dies inside the algorithm's own waits, not in
  // a check's round trip before them.
  if (scenario == "dies-during-coll") setenv("SYMCOMM_COLL_CHECK", "0", 1);
  if (rank == victim) {
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      symcommResult_t rc;
      symcommComm_t comm = init(&rc);
      if (!comm) _exit(3);
      void* buf = nullptr;
      if (symcommMalloc(comm, 64 << 20, &buf) != symcommSuccess) _exit(4);
      if (symcommHostBarrier(comm) != symcommSuccess) _exit(5);
      // Die while the others are inside their calls.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : 1;
  }
  symcommResult_t rc;
  symcommComm_t comm = init(&rc);
  if (!comm) return fail(scenario, rank, symcommGetLastError());
  void* buf = nullptr;
  if (symcommMalloc(comm, 64 << 20, &buf) != symcommSuccess)
    return fail(scenario, rank, symcommGetLastError());
  std::vector<char> src(64 << 20, 1);
  std::memset(buf, 0, 8);
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(scenario, rank, symcommGetLastError());
  const double peer_timeout = std::atof(std::getenv("SYMCOMM_PEER_TIMEOUT"));
  const auto start = Clock::now();
  if (scenario == "dies-during-put") {
    do {
      // The others wait for a word nobody sets: the loss ends that too.
      rc = rank == 0 ? symcommPutOnStream(comm, buf, src.data(), src.size(), victim,
                                          symcommEngineAuto, nullptr)
                     : symcommSignalWaitOnStream(comm, static_cast<uint64_t*>(buf),
                                                 symcommCmpEq, 1, nullptr);
    } while (rc == symcommSuccess && since(start) < 60);
  } else if (scenario == "dies-during-coll") {
    const size_t count = (size_t{16} << 20) / sizeof(float);
    const char* chosen = nullptr;
    if (symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllReduce, count, symcommFloat32,
                             1, &chosen) != symcommSuccess)
      return fail(scenario, rank, symcommGetLastError());
    const coll_caps::Caps hier = coll_caps::across_nodes();
    if (!hier.name || std::strcmp(chosen, hier.name) != 0)
      return fail(scenario, rank, std::string("the automatic choice is ") + chosen +
                                      ", not the algorithm that runs across nodes");
    do {
      rc = symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommFloat32,
                                    symcommSum, nullptr, nullptr);
    } while (rc == symcommSuccess && since(start) < 60);
  } else {
    rc = symcommBarrierOnStream(comm, SYMCOMM_TEAM_WORLD, nullptr);
  }
  const double took = since(start);
  std::printf("%s rank %d: %s after %.2f s: %s\n", scenario.c_str(), rank,
              symcommGetErrorString(rc), took, symcommGetLastError());
  if (rc != symcommPeerLost) return fail(scenario, rank, "expected symcommPeerLost");
  // The bound and room for a loaded machine.
  if (took > peer_timeout + 8) return fail(scenario, rank, "noticed too late");
  symcommFinalize(comm);
  return 0;
}

int connection_cut(int rank) {
  const std::string s = "connection-cut";
  symcommResult_t rc;
  // Connections at the first put, not at init: the cut takes those made since init.
  setenv("SYMCOMM_NET_CONNECT_AT_INIT", "0", 1);
  symcommComm_t comm = init(&rc);
  if (!comm) return fail(s, rank, symcommGetLastError());
  constexpr int kRounds = 12;
  constexpr size_t kBytes = 64 << 20;  // tens of milliseconds on loopback: cut mid-way
  char* slot = nullptr;
  if (symcommMalloc(comm, kBytes, reinterpret_cast<void**>(&slot)) != symcommSuccess)
    return fail(s, rank, symcommGetLastError());
  // The bootstrap's connections exist now; the network transport's come with the first put.
  const std::set<std::string> before = my_connections();
  std::vector<char> src(kBytes);
  int cuts = 0, failed = 0, checked = 0;
  for (int k = 0; k < kRounds; ++k) {
    std::memset(slot, 0, kBytes);
    if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
    uint8_t done = 0;
    if (rank == 0) {
      for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<char>(byte_of(k + 1, i));
      std::thread cutter;
      if (k % 4 == 2) {
        // Cut the network transport's connections (those made since init) under the put.
        std::string cmd = "true";
        for (const std::string& port : my_connections())
          if (!before.count(port)) cmd += " ; ss -K src 127.0.0.1 sport = :" + port + " >/dev/null 2>&1";
        if (cmd != "true") {
          ++cuts;
          cutter = std::thread([cmd] {
            if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "ss -K failed\n");
          });
        }
      }
      const auto start = Clock::now();
      rc = symcommPutOnStream(comm, slot, src.data(), kBytes, 1, symcommEngineAuto, nullptr);
      if (cutter.joinable()) cutter.join();
      if (since(start) > 30) return fail(s, rank, "a put took longer than 30 s");
      if (rc == symcommSuccess) done = 1;
      else if (rc == symcommPeerLost) ++failed;
      else return fail(s, rank, std::string("unexpected error: ") + symcommGetLastError());
    }
    // Rank 0 tells whether its put reported success; rank 1 then checks that it landed.
    uint8_t all[2] = {0, 0};
    if (symcommHostAllgather(comm, &done, all, 1) != symcommSuccess)
      return fail(s, rank, symcommGetLastError());
    if (rank == 1 && all[0]) {
      ++checked;
      for (size_t i = 0; i < kBytes; ++i)
        if (static_cast<uint8_t>(slot[i]) != byte_of(k + 1, i))
          return fail(s, rank, "put " + std::to_string(k) + " reported done but did not land");
    }
    if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  }
  if (rank == 0) {
    std::printf("connection-cut: %d cuts, %d of %d puts failed with symcommPeerLost, the rest "
                "reported done\n", cuts, failed, kRounds);
    if (cuts == 0) return fail(s, rank, "found no connection of the network transport to cut");
  }
  if (rank == 1) std::printf("connection-cut: %d puts reported done, each landed\n", checked);
  symcommFinalize(comm);
  return 0;
}

// The IPv4 address of interface `name` in this namespace ("" where none).
std::string address_of(const std::string& name) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || name != i->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof text);
    found = text;
  }
  freeifaddrs(all);
  return found;
}

int rail_cut(int rank) {
  const std::string s = "rail-cut";
  const char* rails = std::getenv("SYMCOMM_NET_RAILS");
  const std::string list = rails ? rails : "";
  const size_t comma = list.find(',');
  if (comma == std::string::npos) {
    std::printf("SKIP: rail-cut needs two rails or more (SYMCOMM_NET_RAILS)\n");
    return 77;
  }
  const std::string second = list.substr(comma + 1, list.find(',', comma + 1) - comma - 1);
  const std::string address = address_of(second);
  if (address.empty()) return fail(s, rank, "rail " + second + " has no IPv4 address here");
  // The transport's warnings go to stderr: rank 0 keeps them in a file to count them.
  // ("lane N to rank R (...) is tried again" is an info line.)
  LogCapture capture;
  if (rank == 0 && !capture.start("rail_cut")) return fail(s, rank, "cannot redirect stderr");
  symcommResult_t rc;
  symcommComm_t comm = init(&rc);
  if (!comm) return fail(s, rank, symcommGetLastError());
  constexpr int kRounds = 8;
  constexpr size_t kBytes = 64 << 20;  // striped over the rails; shaped, it takes long enough
  char* slot = nullptr;
  char* source = nullptr;  // rank 1's: what rank 0 gets
  if (symcommMalloc(comm, kBytes, reinterpret_cast<void**>(&slot)) != symcommSuccess ||
      symcommMalloc(comm, kBytes, reinterpret_cast<void**>(&source)) != symcommSuccess)
    return fail(s, rank, symcommGetLastError());
  std::vector<char> src(kBytes), got(kBytes);
  int cuts = 0;
  // `call` on rank 0 while, in odd rounds, a thread cuts the second rail's connections.
  auto under_cut = [&](int k, const std::function<symcommResult_t()>& call) {
    std::thread cutter;
    if (k % 2 == 1) {
      ++cuts;
      const std::string cmd = "sleep 0.05; ss -K src " + address + " >/dev/null 2>&1";
      cutter = std::thread([cmd] {
        if (std::system(cmd.c_str()) != 0) std::fprintf(stdout, "ss -K failed\n");
      });
    }
    const auto start = Clock::now();
    const symcommResult_t r = call();
    if (cutter.joinable()) cutter.join();
    if (since(start) > 60) return std::string("a call took longer than 60 s");
    return r == symcommSuccess ? std::string() : std::string(symcommGetLastError());
  };
  for (int k = 0; k < kRounds; ++k) {
    std::memset(slot, 0, kBytes);
    if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
    if (rank == 1)
      for (size_t i = 0; i < kBytes; ++i) source[i] = static_cast<char>(byte_of(k + 101, i));
    if (rank == 0) {
      for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<char>(byte_of(k + 1, i));
      const std::string why = under_cut(k, [&] {
        return symcommPutOnStream(comm, slot, src.data(), kBytes, 1, symcommEngineAuto, nullptr);
      });
      if (!why.empty()) return fail(s, rank, "put " + std::to_string(k) + " failed: " + why);
    }
    if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
    if (rank == 1)
      for (size_t i = 0; i < kBytes; ++i)
        if (static_cast<uint8_t>(slot[i]) != byte_of(k + 1, i))
          return fail(s, rank, "put " + std::to_string(k) + " did not land whole");
    if (rank == 0) {
      std::memset(got.data(), 0, kBytes);
      const std::string why = under_cut(k, [&] {
        return symcommGetOnStream(comm, got.data(), source, kBytes, 1, symcommEngineAuto,
                                  nullptr);
      });
      if (!why.empty()) return fail(s, rank, "get " + std::to_string(k) + " failed: " + why);
      for (size_t i = 0; i < kBytes; ++i)
        if (static_cast<uint8_t>(got[i]) != byte_of(k + 101, i))
          return fail(s, rank, "get " + std::to_string(k) + " did not arrive whole");
    }
    if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  }
  // A second after the last cut the rail is tried again: one more put, uncut, striped over
  // both rails again, lands whole.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::memset(slot, 0, kBytes);
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  if (rank == 0) {
    for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<char>(byte_of(99, i));
    if (symcommPutOnStream(comm, slot, src.data(), kBytes, 1, symcommEngineAuto, nullptr) !=
        symcommSuccess)
      return fail(s, rank, std::string("the put after the cuts: ") + symcommGetLastError());
  }
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  if (rank == 1)
    for (size_t i = 0; i < kBytes; ++i)
      if (static_cast<uint8_t>(slot[i]) != byte_of(99, i))
        return fail(s, rank, "the put after the cuts did not land whole");
  symcommFinalize(comm);
  if (rank == 0) {
    const std::string said = capture.finish();
    const int replays = occurrences(said, "goes again on the other lanes");
    std::printf("rail-cut: %d of %d puts and gets under a cut of rail %s (%s), every one "
                "whole; %d pieces went again on the other rails\n", cuts, 2 * kRounds,
                second.c_str(), address.c_str(), replays);
    if (replays == 0) {
      std::fprintf(stderr, "%s", said.c_str());
      return fail(s, rank, "no piece went again: the cuts hit no transfer");
    }
    if (said.find("is tried again") == std::string::npos) {
      std::fprintf(stderr, "%s", said.c_str());
      return fail(s, rank, "the failed rail was not tried again a second later");
    }
  }
  return 0;
}

int init_fails(const std::string& scenario, int rank, int nranks) {
  if (scenario == "no-libfabric") setenv("SYMCOMM_FABRIC_LIBRARY", "/nonexistent/libfabric.so.1", 1);
  else setenv("SYMCOMM_NET_PROVIDER", "no-such-provider", 1);
  symcommResult_t rc;
  symcommComm_t comm = init(&rc);
  const std::string said = symcommGetLastError();
  std::printf("%s rank %d: %s: %s\n", scenario.c_str(), rank, symcommGetErrorString(rc),
              said.c_str());
  int nodes = 1;
  if (const char* local = std::getenv("SYMCOMM_LOCAL_SIZE")) nodes = nranks / std::atoi(local);
  if (nodes == 1) {
    // No peer needs the network: nothing loads it.
    if (rc != symcommSuccess) return fail(scenario, rank, "one node: init should succeed");
    symcommFinalize(comm);
    return 0;
  }
  if (comm) return fail(scenario, rank, "init succeeded");
  const std::string named = scenario == "no-libfabric" ? "/nonexistent/libfabric.so.1"
                                                       : "no-such-provider";
  if (said.find(named) == std::string::npos) return fail(scenario, rank, "the error does not name " + named);
  if (scenario == "no-libfabric" && rc != symcommNotSupported)
    return fail(scenario, rank, "expected symcommNotSupported");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const char* r = std::getenv("SYMCOMM_RANK");
  const char* n = std::getenv("SYMCOMM_NRANKS");
  if (!r || !n) return fail(scenario, -1, "run under symrun");
  const int rank = std::atoi(r), nranks = std::atoi(n);
  if (scenario == "dies-during-put" || scenario == "dies-during-barrier" ||
      scenario == "dies-during-coll")
    return dies(scenario, rank, nranks);
  if (scenario == "connection-cut") {
    // Every rank decides alike: ss (iproute2) is on this machine or not.
    if (std::system("ss -V >/dev/null 2>&1") != 0) {
      std::printf("SKIP: connection-cut needs ss (iproute2) to destroy connections\n");
      return 77;
    }
    return connection_cut(rank);
  }
  if (scenario == "rail-cut") {
    if (std::system("ss -V >/dev/null 2>&1") != 0) {
      std::printf("SKIP: rail-cut needs ss (iproute2) to destroy connections\n");
      return 77;
    }
    return rail_cut(rank);
  }
  if (scenario == "no-libfabric" || scenario == "unknown-provider")
    return init_fails(scenario, rank, nranks);
  std::fprintf(stderr, "usage: mp_net_fault dies-during-put|dies-during-barrier|dies-during-coll|"
                       "connection-cut|rail-cut|no-libfabric|unknown-provider\n");
  return 2;
}
