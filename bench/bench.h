// Shared pieces of symcomm-bench: timing with CUDA events, medians, the JSON Lines records
// of ../shared/BENCH_FORMAT.md, and an NCCL communicator built over symcomm's bootstrap for
// the in-run baselines.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "record.h"
#include "symcomm/symcomm.h"

namespace bench {

#define BENCH_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) bench::die(#call, cudaGetErrorString(e_), __FILE__, __LINE__);  \
  } while (0)
#define BENCH_SC(call)                                                                     \
  do {                                                                                     \
    if ((call) != symcommSuccess) bench::die(#call, symcommGetLastError(), __FILE__, __LINE__); \
  } while (0)
#define BENCH_NCCL(call)                                                                   \
  do {                                                                                     \
    ncclResult_t r_ = (call);                                                              \
    if (r_ != ncclSuccess) bench::die(#call, ncclGetErrorString(r_), __FILE__, __LINE__);  \
  } while (0)

[[noreturn]] void die(const char* call, const char* why, const char* file, int line);

// Options of `symcomm-bench coll` (coll_bench.cu; --help lists them).
struct CollOptions {
  std::vector<std::string> ops;    // --ops: empty for all of them
  std::vector<std::string> impls;  // --impls: nccl, auto, algorithm names; empty for all
  size_t min_bytes = 8;            // --min-bytes
  int step = 2;                    // --step: factor between sizes
  std::vector<size_t> also;        // --also: sizes measured besides the series
  bool plain = false;              // --plain: cudaMalloc buffers instead of symmetric ones
  int root = 0;                    // --root of broadcast
  double point_ms = 300;           // --point-ms: most timed work per point (large sizes)
  size_t check_bytes = size_t{64} << 20;  // --check-bytes: whole recv checked up to this
  bool graph = false;              // --graph: each batch replayed as one captured CUDA graph
  bool nccl_last = false;          // --nccl-last: NCCL's lines measured after the others
  bool nccl_socket = false;        // --nccl-socket: NCCL restricted to its socket network
};

// Options of `symcomm-bench decomp` (decomp_options.cc; --help lists them).
struct DecompOptions {
  std::vector<int64_t> sizes{256, 512, 1024};  // --sizes: n of n^3 grids
  int64_t max_n = 0;                           // --max-n: 0 for no limit
  std::vector<std::string> dtypes;             // --dtypes: c32, r64; empty for both
  std::vector<std::string> grids;              // --grids: "PRxPC"; empty for all
  std::vector<std::string> backends;           // --backends: empty for every registered one
  bool local = false;                          // --local-buffers: cudaMalloc'd pencils
  bool contiguous = false;                     // --contiguous: axis-contiguous pencils
  std::vector<std::string> ops;                // --ops: xy,yz,zy,yx timed; empty for all four
  bool graph = false;                          // --graph: each batch one replayed CUDA graph
  bool autotune = true;                        // --no-autotune clears it
};

// Options of `symcomm-bench net` (net_bench.cc; --help lists them).
struct NetOptions {
  std::vector<size_t> sizes;      // --sizes: put bandwidth sizes; default 1K..256M by x4
  std::vector<size_t> lat_sizes;  // --lat-sizes: ping-pong sizes; default 8..64K by x2
  int window = 64;                // --window: raw fi_writes in flight (as fi_rma_bw's -W)
  int rounds = 200;               // --rounds: round trips per timed ping-pong repetition
  size_t rep_bytes = size_t{64} << 20;  // --rep-bytes: bytes put per timed repetition
  double idle_s = 3;              // --idle-s: seconds of idle CPU measured (0: skipped)
  bool nbi = false;               // --nbi: symcomm's puts by symcommPutNbiOnStream
  std::string kill_rail;          // --kill-rail: the failover stream instead (net_failover.cc)
  double kill_at_s = 2;           // --kill-at-s
  double after_kill_s = 4;        // --after-kill-s
  size_t stream_bytes = size_t{8} << 20;  // --stream-bytes
};

// Options of `symcomm-bench fused` (fused_bench.cu; --help lists them).
struct FusedOptions {
  std::vector<int64_t> cubes{1024, 2048, 4096, 8192, 16384};  // --shapes: M = N = K
  bool llm = false;               // --llm: also M = K = 8192, N 1024, 3584, 28672
  std::vector<std::string> ops;   // --fused-ops: ag_gemm, gemm_rs; empty for both
};

struct Options {
  std::string json;       // --json FILE: JSON Lines, appended
  std::string machine;    // --machine NAME; default machine_name() of this GPU (record.h)
  int iters = 20;         // --iters: timed repetitions per point (median reported)
  int warmup = 3;         // --warmup
  size_t max_bytes = size_t{1} << 30;  // --max-bytes
  bool hold = false;      // --hold: batches timed behind a StreamHold (time_stream_us)
  CollOptions coll;
  DecompOptions decomp;
  NetOptions net;
  FusedOptions fused;
};

struct Context {
  symcommComm_t comm;
  int rank, nranks;
  Options opt;
  cudaStream_t stream;  // nullptr in the host space
  ncclComm_t nccl = nullptr;
  // The communicator is in the host memory space: no GPU, no stream; every call has
  // completed when it returns (only subcommands that measure the host space see it).
  bool host = false;
};

// A kernel that holds a stream until release() (hold.cu): each timed batch of --hold starts
// behind one, so that its time leaves out the host's enqueueing of its first call.
class StreamHold {
 public:
  StreamHold();
  ~StreamHold();
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void hold(cudaStream_t s);  // the next batch's kernel, on s
  void release();             // lets it end
  // After the batch's completion: whether the kernel stopped waiting at its bound (a call of
  // the batch waited for the GPU); cleared by the call.
  bool gave_up();

 private:
  uint32_t* host_ = nullptr;  // [0] the batch released, [1] gave up (mapped pinned memory)
  uint32_t* dev_ = nullptr;
  uint32_t batch_ = 0;
};

// --hold (every subcommand): time_stream_us holds each batch behind a StreamHold.
void set_hold(bool on);

// Median time per call of `body` over `reps` batches of `inner` back-to-back calls on stream s
// (events around each batch; with --hold each batch waits behind a StreamHold until it is
// all enqueued, else the first call's enqueueing is in the batch's time). host_us, if given,
// receives the median host time per call to enqueue a batch: where it is close to the result,
// the host, not the GPU, set the pace.
double time_stream_us(cudaStream_t s, int warmup, int reps, int inner, const std::function<void()>& body,
                      double* host_us = nullptr);
double median(std::vector<double> v);
// time_stream_us on ctx.stream, or in the host space the clock around each batch (its calls
// have completed when they return; host_us is then the same time).
double time_calls_us(const Context& ctx, int warmup, int reps, int inner,
                     const std::function<void()>& body, double* host_us = nullptr);

// `calls` back-to-back calls of `call` on stream s, captured once into a CUDA graph (in the
// thread-local capture mode) and replayed by launch(): a batch with one host launch instead
// of one per call. ok() is false where the capture failed: a call returned an error (the
// library refuses what cannot be captured before it enqueues anything) or the capture was
// invalidated; why() says which.
class GraphBatch {
 public:
  GraphBatch(cudaStream_t s, int calls, const std::function<symcommResult_t()>& call);
  ~GraphBatch();
  GraphBatch(const GraphBatch&) = delete;
  GraphBatch& operator=(const GraphBatch&) = delete;
  bool ok() const { return exec_ != nullptr; }
  const std::string& why() const { return why_; }
  void launch() const;  // on the stream it was captured on

 private:
  cudaStream_t stream_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::string why_;
};

// The items of a comma-separated list ("a,b,,c" gives a, b, c).
std::vector<std::string> split_list(const char* text);
// A byte count: a number (decimal or 0x hex) with an optional K, M or G (powers of 1024).
bool parse_bytes(const char* text, size_t* bytes);
// The largest of every rank's value (for collective timings).
double max_over_ranks(const Context& ctx, double v);

void emit(const Context& ctx, const Record& r);  // table line on rank 0 and JSON
void write_json(const Context& ctx, const Record& r);  // rank 0 appends r to --json FILE
void print_header(const Context& ctx, const char* title);
ncclComm_t make_nccl(const Context& ctx);

int run_rma(Context& ctx);

// symcomm-bench coll. Its options are parsed before the communicator exists (so --help and
// mistakes need no GPU): coll_option takes argv[i] (and its value, advancing i) if it is
// one of them, and exits with status 2 on a bad value.
extern const char* const kCollUsage;
bool coll_option(Options& opt, int argc, char** argv, int& i);
int run_coll(Context& ctx);

// symcomm-bench decomp: options parsed like coll's (before the communicator exists;
// decomp_options.cc), run by decomp_bench.cu.
extern const char* const kDecompUsage;
bool decomp_option(Options& opt, int argc, char** argv, int& i);
int run_decomp(Context& ctx);

// symcomm-bench net: the net transport against raw libfabric (and NCCL's socket path in the
// cuda space), either memory space, two ranks on two nodes (net_bench.cc); options parsed
// like coll's.
extern const char* const kNetUsage;
bool net_option(Options& opt, int argc, char** argv, int& i);
int run_net(Context& ctx);

// symcomm-bench fused: all-gather + GEMM and GEMM + reduce-scatter against the GEMM alone and
// NCCL + cuBLASLt (fused_bench.cu); options parsed like coll's.
extern const char* const kFusedUsage;
bool fused_option(Options& opt, int argc, char** argv, int& i);
int run_fused(Context& ctx);

}  // namespace bench
