// A rank that dies or hangs, before, during or after init: the other ranks must get an
// error within the documented bound, and never hang. Run as every rank under
// `symrun --keep-going -n N mp_fault SCENARIO`. The victim rank forks: its child plays the
// victim, and the parent exits 0 once the child is gone, so that symrun's exit code says
// whether the survivors passed.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "symcomm/symcomm.h"

namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

symcommConfig_t config() {
  symcommConfig_t c;
  symcommConfigInit(&c);
  const char* s = std::getenv("SYMCOMM_TEST_SPACE");
  c.space = s && std::strcmp(s, "cuda") == 0 ? symcommSpaceCuda : symcommSpaceHost;
  return c;
}

int fail(const char* scenario, int rank, const std::string& why) {
  std::fprintf(stderr, "FAIL %s rank %d: %s\n", scenario, rank, why.c_str());
  return 1;
}

// The victim's child: joins (or not) and then dies or stops, as the scenario says.
[[noreturn]] void play_victim(const std::string& scenario) {
  symcommConfig_t cfg = config();
  symcommComm_t comm = nullptr;
  if (scenario == "dies-during-init") {
    std::thread([&] { symcommInitFromEnv(&comm, &cfg); }).detach();
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
    raise(SIGKILL);
  }
  if (symcommInitFromEnv(&comm, &cfg) != symcommSuccess) _exit(3);
  void* word = nullptr;
  if (scenario == "dies-during-wait" && symcommMalloc(comm, 8, &word) != symcommSuccess) _exit(6);
  if (symcommHostBarrier(comm) != symcommSuccess) _exit(4);
  raise(scenario == "stops-after-init" ? SIGSTOP : SIGKILL);
  _exit(5);
}

// The victim's parent: waits for the child to die (or stop, then kills it later).
int await_victim(pid_t child, const std::string& scenario) {
  int status = 0;
  if (waitpid(child, &status, WUNTRACED) < 0) return 1;
  if (WIFSTOPPED(status)) {
    // Long enough for the others to notice the silence (SYMCOMM_PEER_TIMEOUT is short here).
    std::this_thread::sleep_for(std::chrono::seconds(8));
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  std::printf("victim (%s): child %s\n", scenario.c_str(), killed ? "was killed as planned"
                                                                  : "exited unexpectedly");
  return killed ? 0 : 1;
}

// Waits for a signal nobody will send while the victim dies: the wait must end with the
// loss (the host space returns it; on GPUs the wait kernel sees the abort flag and lets
// the stream go on, and the next call reports the loss), long before SYMCOMM_WAIT_TIMEOUT.
int survive_wait(symcommComm_t comm, const char* s, int rank) {
  uint64_t* word = nullptr;
  if (symcommMalloc(comm, 8, reinterpret_cast<void**>(&word)) != symcommSuccess)
    return fail(s, rank, symcommGetLastError());
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  auto start = Clock::now();  // the victim dies now
  symcommResult_t rc = symcommSignalWaitOnStream(comm, word, symcommCmpEq, 12345, nullptr);
  if (rc == symcommSuccess) {
    if (cudaDeviceSynchronize() != cudaSuccess) return fail(s, rank, "the wait kernel failed");
    rc = symcommQuietOnStream(comm, nullptr);
  }
  double took = since(start);
  std::printf("%s rank %d: %s after %.2f s: %s\n", s, rank, symcommGetErrorString(rc), took,
              symcommGetLastError());
  if (rc != symcommPeerLost) return fail(s, rank, "expected symcommPeerLost");
  if (took > 10) return fail(s, rank, "the wait did not end in time");
  symcommFinalize(comm);
  return 0;
}

// The same with a ce collective (cuda space): its stream waits on flags with
// cuStreamWaitValue64, which the communicator's abort releases; the stream then goes on and
// the next call reports the loss, long before SYMCOMM_WAIT_TIMEOUT.
int survive_ce(symcommComm_t comm, const char* s, int rank) {
  const size_t count = 1 << 16;
  int n = 0;
  void* send = nullptr;
  void* recv = nullptr;
  cudaStream_t stream = nullptr;
  if (symcommCommSize(comm, &n) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  if (cudaMalloc(&send, count * 4) != cudaSuccess ||
      cudaMalloc(&recv, count * 4 * static_cast<size_t>(n)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return fail(s, rank, "cudaMalloc or cudaStreamCreate failed");
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  auto start = Clock::now();  // the victim dies now
  symcommResult_t rc = symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count,
                                                symcommInt32, "ce", stream);
  if (rc == symcommSuccess) {
    if (cudaStreamSynchronize(stream) != cudaSuccess) return fail(s, rank, "the ce stream failed");
    rc = symcommQuietOnStream(comm, stream);
  }
  double took = since(start);
  std::printf("%s rank %d: %s after %.2f s: %s\n", s, rank, symcommGetErrorString(rc), took,
              symcommGetLastError());
  if (rc != symcommPeerLost) return fail(s, rank, "expected symcommPeerLost");
  if (took > 10) return fail(s, rank, "the ce wait did not end in time");
  // ce refuses to run on the communicator from now on (its flags stay released).
  symcommFinalize(comm);
  return 0;
}

int survive(const std::string& scenario, int rank) {
  const char* s = scenario.c_str();
  symcommConfig_t cfg = config();
  symcommComm_t comm = nullptr;
  const double bootstrap_timeout = std::atof(std::getenv("SYMCOMM_BOOTSTRAP_TIMEOUT"));
  const double peer_timeout = std::atof(std::getenv("SYMCOMM_PEER_TIMEOUT"));
  auto start = Clock::now();
  symcommResult_t rc = symcommInitFromEnv(&comm, &cfg);
  if (scenario == "dies-before-init" || scenario == "dies-during-init") {
    if (rc == symcommSuccess) {  // the victim died after its part of the join was done
      rc = symcommHostBarrier(comm);
      symcommFinalize(comm);
    }
    double took = since(start);
    std::printf("%s rank %d: %s after %.2f s: %s\n", s, rank, symcommGetErrorString(rc), took,
                symcommGetLastError());
    if (rc != symcommTimeout && rc != symcommPeerLost)
      return fail(s, rank, "expected symcommTimeout or symcommPeerLost");
    if (took > bootstrap_timeout + 3) return fail(s, rank, "the error came too late");
    return 0;
  }
  if (rc != symcommSuccess) return fail(s, rank, symcommGetLastError());
  if (scenario == "dies-during-wait") return survive_wait(comm, s, rank);
  if (scenario == "dies-during-ce") return survive_ce(comm, s, rank);
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  start = Clock::now();  // the victim dies or stops now
  rc = symcommHostBarrier(comm);
  double took = since(start);
  std::string message = symcommGetLastError();
  std::printf("%s rank %d: %s after %.2f s: %s\n", s, rank, symcommGetErrorString(rc), took,
              message.c_str());
  if (rc != symcommPeerLost) return fail(s, rank, "expected symcommPeerLost");
  double bound = scenario == "stops-after-init" ? peer_timeout + 2 : 10;
  if (took > bound) return fail(s, rank, "noticed too late");
  if (scenario == "stops-after-init" && rank == 0 && message.find("no heartbeat") == std::string::npos)
    return fail(s, rank, "rank 0 should blame the missing heartbeats");
  // Every later call says the same, at once; finalize frees and reports the loss.
  void* p = nullptr;
  start = Clock::now();
  if (symcommMalloc(comm, 4096, &p) != symcommPeerLost || since(start) > 1)
    return fail(s, rank, "a later call did not fail at once with symcommPeerLost");
  rc = symcommFinalize(comm);
  if (rc == symcommSuccess && rank == 0) return fail(s, rank, "finalize hid the loss");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario != "dies-before-init" && scenario != "dies-during-init" &&
      scenario != "dies-after-init" && scenario != "hub-dies-after-init" &&
      scenario != "stops-after-init" && scenario != "dies-during-wait" &&
      scenario != "dies-during-ce") {
    std::fprintf(stderr, "usage: mp_fault dies-before-init|dies-during-init|dies-after-init|"
                 "hub-dies-after-init|stops-after-init|dies-during-wait|dies-during-ce\n");
    return 2;
  }
  const char* space = std::getenv("SYMCOMM_TEST_SPACE");
  if (scenario == "dies-during-ce" && !(space && std::strcmp(space, "cuda") == 0)) {
    std::printf("SKIP: ce collectives run in the cuda space only\n");
    return 77;
  }
  if (space && std::strcmp(space, "cuda") == 0) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
      std::printf("SKIP: the cuda space is not available here: %s\n", dlerror());
      return 77;
    }
  }
  int rank = env_int("SYMCOMM_RANK"), nranks = env_int("SYMCOMM_NRANKS");
  int victim = scenario == "hub-dies-after-init" ? 0 : nranks - 1;
  if (rank != victim) return survive(scenario, rank);
  if (scenario == "dies-before-init") return 0;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) play_victim(scenario);
  return await_victim(child, scenario);
}
