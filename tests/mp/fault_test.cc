// A rank that dies or hangs, before, during or after init, or while the others are inside a
// call that needs it: the other ranks must get an error within the documented bound, and
// never hang. Run as every rank under `symrun --keep-going -n N mp_fault SCENARIO [NAME]`.
// The victim rank forks: its child plays the victim, and the parent exits 0 once the child
// is gone, so that symrun's exit code says whether the survivors passed.
//
// dies-during-coll NAME and dies-during-transpose NAME: every rank runs one collective by
// algorithm NAME (or one transpose by decomposition backend NAME) that must succeed; then the
// victim dies and the survivors run it again. Their kernels (or stream memory operations,
// NCCL's kernels, host waits) wait for a rank that is gone: the loss must end them and the
// call must report symcommPeerLost, long before SYMCOMM_WAIT_TIMEOUT.
//
// dies-during-fused NAME: the same with an all-gather + GEMM by fused implementation NAME
//                      (NAME:transpose: a transpose + accumulate by it).
//
// dies-during-wait / dies-during-recv: the survivors wait for a signal from the victim, or
// receive from it (symcommRecvOnStream), when it dies: symcommPeerLost naming it, in time.
//
// list-coll SPACE NRANKS: the registered collective algorithms that run in memory space SPACE
// (host or cuda) on NRANKS ranks, as their descriptors say, one per line: ctest's list of
// dies-during-coll tests (tests/CMakeLists.txt). list-transpose SPACE: the registered
// decomposition backends that run in SPACE, likewise, for the dies-during-transpose tests.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "coll_caps.h"
#include "symcomm/decomp.h"
#include "symcomm/fused.h"
#include "symcomm/symcomm.h"

namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool cuda_space() {
  const char* s = std::getenv("SYMCOMM_TEST_SPACE");
  return s && std::strcmp(s, "cuda") == 0;
}

symcommConfig_t config() {
  symcommConfig_t c;
  symcommConfigInit(&c);
  c.space = cuda_space() ? symcommSpaceCuda : symcommSpaceHost;
  return c;
}

int fail(const char* scenario, int rank, const std::string& why) {
  std::fprintf(stderr, "FAIL %s rank %d: %s\n", scenario, rank, why.c_str());
  return 1;
}

// The call of dies-during-coll (a collective by one algorithm), dies-during-transpose (a
// Y->Z transpose on a 1 x N grid, so that every rank exchanges with every other, by one
// backend) or dies-during-fused (an all-gather + GEMM by one implementation, or with NAME:transpose
// a transpose + accumulate), on symmetric
// buffers, on a stream of its own in the cuda space.
class Workload {
 public:
  Workload(std::string scenario, std::string name)
      : transpose_(scenario == "dies-during-transpose"),
        fused_(scenario == "dies-during-fused"), name_(std::move(name)) {}
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  // Collective over the communicator: buffers, the stream, the decomposition. "" or what
  // failed.
  std::string setup(symcommComm_t comm) {
    comm_ = comm;
    if (symcommCommSize(comm, &n_) != symcommSuccess) return symcommGetLastError();
    if (cuda_space() && cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess)
      return "cudaStreamCreateWithFlags failed";
    size_t bytes = kCount * sizeof(float) * static_cast<size_t>(n_);
    if (transpose_) {
      symcommDecompConfig_t c;
      symcommDecompConfigInit(&c);
      for (int64_t& d : c.gdims) d = kPoints;
      c.pdims[0] = 1;
      c.pdims[1] = n_;
      std::snprintf(c.backend, sizeof(c.backend), "%s", name_.c_str());
      size_t ws = 0;
      if (symcommDecompCreate(comm, &c, &decomp_) != symcommSuccess ||
          symcommDecompWorkspaceSize(decomp_, symcommR64, &ws) != symcommSuccess ||
          symcommMalloc(comm, ws, &workspace_) != symcommSuccess)
        return symcommGetLastError();
      bytes = kPoints * kPoints * kPoints * sizeof(double);  // the grid: room for any pencil
    }
    if (fused_) {
      // C [16 n, 8] = the gathered A [16 n, 8] x B [8, 8], bfloat16 (A and B of zeros); for
      // NAME:transpose, out [16 n, 16] += X's block transposed, 16 columns a member.
      symcommFusedConfig_t c;
      symcommFusedConfigInit(&c);
      c.n = c.k = 8;
      for (int r = 0; r < n_; ++r) c.rows[r] = 16;
      std::string impl = name_;
      const size_t colon = impl.find(':');
      if (colon != std::string::npos && impl.substr(colon) == ":transpose") {
        impl.resize(colon);
        c.op = symcommFusedTransposeAccumulate;
        c.n = 16 * n_;
        for (int r = 0; r < n_; ++r) c.rows[r] = 0, c.cols[r] = 16;
      }
      std::snprintf(c.implementation, sizeof c.implementation, "%s", impl.c_str());
      size_t ws = 0;
      if (symcommFusedPlanCreate(comm, SYMCOMM_TEAM_WORLD, &c, &plan_) != symcommSuccess ||
          symcommFusedWorkspaceSize(plan_, &ws) != symcommSuccess ||
          (ws && symcommMalloc(comm, ws, &workspace_) != symcommSuccess) ||
          symcommMalloc(comm, 8 * 8 * 2, &b_) != symcommSuccess)
        return symcommGetLastError();
      if (!cuda_space()) std::memset(b_, 0, 8 * 8 * 2);
      else if (cudaMemset(b_, 0, 8 * 8 * 2) != cudaSuccess) return "cudaMemset failed";
    }
    if (symcommMalloc(comm, bytes, &send_) != symcommSuccess ||
        symcommMalloc(comm, bytes, &recv_) != symcommSuccess)
      return symcommGetLastError();
    if (!cuda_space()) {
      std::memset(send_, 0, bytes);
    } else if (cudaMemset(send_, 0, bytes) != cudaSuccess ||
               cudaDeviceSynchronize() != cudaSuccess) {
      return "cudaMemset failed";
    }
    return "";
  }

  // Puts one call on the stream (in the host space: runs it).
  symcommResult_t launch() {
    const char* a = name_.c_str();
    if (transpose_)
      return symcommDecompTranspose(decomp_, 1, 2, send_, recv_, workspace_, symcommR64, nullptr,
                                    nullptr, nullptr, nullptr, stream_);
    if (fused_) return symcommFusedRun(plan_, send_, b_, recv_, nullptr, workspace_, stream_);
    // An operation the algorithm does (its descriptor), in which every member waits for
    // every other: all-to-all where it does it, else all-gather, all-reduce, broadcast.
    const coll_caps::Caps caps = coll_caps::of(name_);
    if (caps.does(symcommCollAllToAll))
      return symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send_, recv_, kCount,
                                     symcommFloat32, a, stream_);
    if (caps.does(symcommCollAllGather))
      return symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send_, recv_, kCount,
                                      symcommFloat32, a, stream_);
    if (caps.does(symcommCollAllReduce))
      return symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send_, recv_, kCount,
                                      symcommFloat32, symcommSum, a, stream_);
    return symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send_, recv_, kCount,
                                    symcommFloat32, 0, a, stream_);
  }

  // Waits for the stream (a CUDA error there is the test's failure, in *why), then asks the
  // communicator what its kernels and waits recorded.
  symcommResult_t complete(std::string* why) {
    if (stream_ != nullptr) {
      cudaError_t e = cudaStreamSynchronize(stream_);
      if (e != cudaSuccess) {
        *why = std::string("the stream failed: ") + cudaGetErrorString(e);
        return symcommInternalError;
      }
    }
    return symcommQuietOnStream(comm_, stream_);
  }

 private:
  static constexpr size_t kCount = 4096;  // elements per member
  static constexpr int64_t kPoints = 24;  // grid points per axis (divisible by 2, 3, 4, 8)
  const bool transpose_, fused_;
  const std::string name_;
  symcommComm_t comm_ = nullptr;
  int n_ = 0;
  cudaStream_t stream_ = nullptr;
  symcommDecomp_t decomp_ = nullptr;
  symcommFusedPlan_t plan_ = nullptr;
  void* b_ = nullptr;
  void* workspace_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

bool during_call(const std::string& scenario) {
  return scenario == "dies-during-coll" || scenario == "dies-during-transpose" ||
         scenario == "dies-during-fused";
}

// The victim's child: joins (or not) and then dies or stops, as the scenario says.
[[noreturn]] void play_victim(const std::string& scenario, const std::string& name) {
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
  Workload work(scenario, name);
  if (during_call(scenario)) {
    std::string why;
    symcommResult_t rc = symcommInternalError;
    if (work.setup(comm).empty() && (rc = work.launch()) == symcommSuccess)
      rc = work.complete(&why);
    if (rc != symcommSuccess) _exit(7);  // the survivors' first call fails too
  }
  if (symcommHostBarrier(comm) != symcommSuccess) _exit(4);
  // The survivors' call is under way by then: it waits for this rank when the rank dies.
  if (during_call(scenario)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  raise(scenario == "stops-after-init" ? SIGSTOP : SIGKILL);
  _exit(5);
}

// The victim's parent: waits for the child to die (or stop, then kills it later).
int await_victim(pid_t child, const std::string& scenario) {
  int status = 0;
  if (waitpid(child, &status, WUNTRACED) < 0) return 1;
  if (WIFSTOPPED(status)) {
    // Long enough for the others to notice the silence (SYMCOMM_PEER_TIMEOUT, 5 s here,
    // with room for a loaded machine).
    std::this_thread::sleep_for(std::chrono::seconds(15));
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  std::printf("victim (%s): child %s\n", scenario.c_str(),
              killed ? "was killed as planned" : "exited unexpectedly");
  return killed ? 0 : 1;
}

// Whether the last error names `victim` as the rank that was lost (not a member that left a
// barrier because of the loss, which a wait may have been watching).
bool names_the_victim(symcommComm_t comm) {
  int n = 0;
  if (symcommCommSize(comm, &n) != symcommSuccess) return false;
  const std::string want = "rank " + std::to_string(n - 1) + " (pid ";
  return std::strstr(symcommGetLastError(), want.c_str()) != nullptr &&
         std::strstr(symcommGetLastError(), "was lost") != nullptr;
}

// Waits for a signal nobody will send while the victim dies: the wait must end with the
// loss (the host space returns it; on GPUs the wait kernel sees the abort flag and lets
// the stream go on, and the next call reports the loss), long before SYMCOMM_WAIT_TIMEOUT.
// dies-during-recv: a receive from the victim, which never sends (the host space; the cuda
// space refuses send and receive so far).
int survive_wait(symcommComm_t comm, const char* s, int rank, bool recv) {
  uint64_t* word = nullptr;
  if (!recv && symcommMalloc(comm, 8, reinterpret_cast<void**>(&word)) != symcommSuccess)
    return fail(s, rank, symcommGetLastError());
  int n = 0;
  if (symcommCommSize(comm, &n) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  auto start = Clock::now();  // the victim dies now
  uint8_t in[8] = {};
  symcommResult_t rc =
      recv ? symcommRecvOnStream(comm, SYMCOMM_TEAM_WORLD, in, sizeof in, symcommUint8, n - 1,
                                 nullptr)
           : symcommSignalWaitOnStream(comm, word, symcommCmpEq, 12345, nullptr);
  if (rc == symcommSuccess) {
    if (cudaDeviceSynchronize() != cudaSuccess) return fail(s, rank, "the wait kernel failed");
    rc = symcommQuietOnStream(comm, nullptr);
  }
  double took = since(start);
  std::printf("%s rank %d: %s after %.2f s: %s\n", s, rank, symcommGetErrorString(rc), took,
              symcommGetLastError());
  if (rc != symcommPeerLost) return fail(s, rank, "expected symcommPeerLost");
  if (took > 10) return fail(s, rank, "the wait did not end in time");
  if (!names_the_victim(comm)) return fail(s, rank, "the error does not name the lost rank");
  symcommFinalize(comm);
  return 0;
}

// A call that needs the victim, after one that every rank made: kernels, stream memory
// operations (ce), NCCL's kernels or host waits that wait for the victim must end through
// the communicator's abort, so that the stream completes without a CUDA error and the call
// (or the next, symcommQuietOnStream) reports symcommPeerLost, long before
// SYMCOMM_WAIT_TIMEOUT. Then the call fails at once.
int survive_call(symcommComm_t comm, const std::string& scenario, const std::string& name,
                 int rank) {
  const std::string label = scenario + " " + name;
  const char* s = label.c_str();
  Workload work(scenario, name);
  if (std::string why = work.setup(comm); !why.empty()) return fail(s, rank, "setup: " + why);
  std::string why;
  symcommResult_t rc = work.launch();
  if (rc == symcommSuccess) rc = work.complete(&why);
  if (rc != symcommSuccess)
    return fail(s, rank, "the call with every rank alive failed: " + why + symcommGetLastError());
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  auto start = Clock::now();  // the victim dies 0.3 s from now
  rc = work.launch();
  const bool launched = rc == symcommSuccess;
  if (launched) {
    rc = work.complete(&why);
    if (!why.empty()) return fail(s, rank, why);
  }
  double took = since(start);
  std::printf(
      "%s rank %d: %s after %.2f s (%s): %s\n", s, rank, symcommGetErrorString(rc), took,
      launched ? "launched; the stream ended, then the quiet reported it" : "the call returned it",
      symcommGetLastError());
  if (rc != symcommPeerLost) return fail(s, rank, "expected symcommPeerLost");
  if (took > 10) return fail(s, rank, "the call did not end in time");
  if (!names_the_victim(comm)) return fail(s, rank, "the error does not name the lost rank");
  start = Clock::now();
  rc = work.launch();
  if (rc != symcommPeerLost || since(start) > 1)
    return fail(s, rank,
                std::string("the next call did not fail at once with symcommPeerLost: ") +
                    symcommGetErrorString(rc));
  symcommFinalize(comm);
  return 0;
}

int survive(const std::string& scenario, const std::string& name, int rank) {
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
    // The bound, the answer's margin (2 s) and room for a loaded machine.
    if (took > bootstrap_timeout + 6) return fail(s, rank, "the error came too late");
    return 0;
  }
  if (rc != symcommSuccess) return fail(s, rank, symcommGetLastError());
  if (scenario == "dies-during-wait" || scenario == "dies-during-recv")
    return survive_wait(comm, s, rank, scenario == "dies-during-recv");
  if (during_call(scenario)) return survive_call(comm, scenario, name, rank);
  if (symcommHostBarrier(comm) != symcommSuccess) return fail(s, rank, symcommGetLastError());
  start = Clock::now();  // the victim dies or stops now
  rc = symcommHostBarrier(comm);
  double took = since(start);
  std::string message = symcommGetLastError();
  std::printf("%s rank %d: %s after %.2f s: %s\n", s, rank, symcommGetErrorString(rc), took,
              message.c_str());
  if (rc != symcommPeerLost) return fail(s, rank, "expected symcommPeerLost");
  // Room for a loaded machine beside the bound (ctest runs tests side by side on 2 cores).
  double bound = scenario == "stops-after-init" ? peer_timeout + 6 : 10;
  if (took > bound) return fail(s, rank, "noticed too late");
  if (scenario == "stops-after-init" && rank == 0 &&
      message.find("no heartbeat") == std::string::npos)
    return fail(s, rank, "rank 0 should blame the missing heartbeats");
  // Every later call says the same, at once; finalize frees and reports the loss.
  void* p = nullptr;
  start = Clock::now();
  if (symcommMalloc(comm, 4096, &p) != symcommPeerLost || since(start) > 1)
    return fail(s, rank, "a later call did not fail at once with symcommPeerLost");
  // The survivors' monitors log the loss themselves (mp_fault_log_names_rank), each within
  // SYMCOMM_PEER_TIMEOUT; one may have heard of it from another rank's call first, so none
  // finalizes (which ends its monitor) before that bound has passed.
  if (scenario == "dies-after-init")
    std::this_thread::sleep_for(std::chrono::duration<double>(peer_timeout + 1));
  rc = symcommFinalize(comm);
  if (rc == symcommSuccess && rank == 0) return fail(s, rank, "finalize hid the loss");
  return 0;
}

// The number of GPUs, counted in a child process: CUDA must not be initialised in this one
// before the victim forks (a child cannot use CUDA that its parent initialised).
int gpu_count() {
  const pid_t child = fork();
  if (child < 0) return 0;
  if (child == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    _exit(std::min(n, 100));
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 0;
  return WEXITSTATUS(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  std::string name = argc > 2 ? argv[2] : "";
  if (scenario == "list-coll" && argc == 4) {
    const std::string space = argv[2];
    const int nranks = std::atoi(argv[3]);
    for (const coll_caps::Caps& c : coll_caps::all())
      if (c.runs_in(space == "cuda" ? symcommSpaceCuda : symcommSpaceHost) && c.fits(nranks) &&
          c.reaches(1))  // the ranks are on one node (hier's fault: mp_net_fault)
        std::printf("%s\n", c.name);
    return 0;
  }
  if (scenario == "list-transpose" && argc == 3) {
    const unsigned bit = 1u << (std::string(argv[2]) == "cuda" ? symcommSpaceCuda : symcommSpaceHost);
    for (int i = 0; i < symcommDecompBackendCount(); ++i) {
      symcommDecompBackendInfo_t info{};
      if (symcommDecompGetBackendInfo(i, &info) != symcommSuccess) return 1;
      if (info.spaces & bit) std::printf("%s\n", info.name);
    }
    return 0;
  }
  if ((scenario != "dies-before-init" && scenario != "dies-during-init" &&
       scenario != "dies-after-init" && scenario != "hub-dies-after-init" &&
       scenario != "stops-after-init" && scenario != "dies-during-wait" &&
       scenario != "dies-during-recv" && !during_call(scenario)) ||
      during_call(scenario) == name.empty()) {
    std::fprintf(stderr,
                 "usage: mp_fault dies-before-init|dies-during-init|dies-after-init|"
                 "hub-dies-after-init|stops-after-init|dies-during-wait|dies-during-recv\n"
                 "       mp_fault dies-during-coll ALGORITHM | dies-during-transpose BACKEND |\n"
                 "                dies-during-fused IMPLEMENTATION\n"
                 "       mp_fault list-coll host|cuda NRANKS | list-transpose host|cuda\n");
    return 2;
  }
  if (cuda_space()) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
      std::printf("SKIP: the cuda space is not available here: %s\n", dlerror());
      return 77;
    }
  }
  // An algorithm or backend built on NCCL (a collective algorithm's descriptor names the
  // library): every rank decides alike, before the victim forks.
  const bool coll_library = scenario == "dies-during-coll" && coll_caps::of(name).library;
  const bool nccl = coll_library || (scenario == "dies-during-transpose" && name.rfind("nccl", 0) == 0);
  if (nccl) {
    const char* lib = std::getenv("SYMCOMM_NCCL_LIBRARY");
    if (!dlopen(lib && *lib ? lib : "libnccl.so.2", RTLD_NOW)) {
      std::printf("SKIP: NCCL cannot be loaded here: %s\n", dlerror());
      return 77;
    }
  }
  int rank = env_int("SYMCOMM_RANK"), nranks = env_int("SYMCOMM_NRANKS");
  if (nccl && cuda_space()) {
    // NCCL refuses two ranks on one GPU: the algorithm would be refused at setup.
    const int gpus = gpu_count();
    if (gpus < nranks) {
      std::printf("SKIP: %d ranks need as many GPUs for NCCL, %d here\n", nranks, gpus);
      return 77;
    }
  }
  int victim = scenario == "hub-dies-after-init" ? 0 : nranks - 1;
  if (rank != victim) return survive(scenario, name, rank);
  if (scenario == "dies-before-init") return 0;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) play_victim(scenario, name);
  return await_victim(child, scenario);
}
