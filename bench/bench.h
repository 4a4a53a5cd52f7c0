// Shared pieces of symcomm-bench: timing with CUDA events, medians, the JSON Lines records
// of ../shared/BENCH_FORMAT.md, and an NCCL communicator built over symcomm's bootstrap for
// the in-run baselines.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

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

struct Options {
  std::string json;       // --json FILE: JSON Lines, appended
  std::string machine = "unknown";  // --machine NAME
  int iters = 20;         // --iters: timed repetitions per point (median reported)
  int warmup = 3;         // --warmup
  size_t max_bytes = size_t{1} << 30;  // --max-bytes
};

struct Context {
  symcommComm_t comm;
  int rank, nranks;
  Options opt;
  cudaStream_t stream;
  ncclComm_t nccl = nullptr;
};

// One measured point. time_us is the median over repetitions.
struct Record {
  std::string op, impl, dtype = "bytes", shape;
  size_t bytes = 0;
  int ranks = 0;
  double time_us = 0, algbw_gbs = -1, busbw_gbs = -1;
  int iters = 0, warmup = 0;
};

// Median of the per-repetition times of `body` in microseconds: each repetition runs `body`
// `inner` times on the stream between two events; the result is per call of body.
double time_stream_us(cudaStream_t s, int warmup, int reps, int inner, const std::function<void()>& body);
double median(std::vector<double> v);
// The largest of every rank's value (for collective timings).
double max_over_ranks(const Context& ctx, double v);

void emit(const Context& ctx, const Record& r);  // table line on rank 0 and JSON
void print_header(const Context& ctx, const char* title);
ncclComm_t make_nccl(const Context& ctx);

int run_rma(Context& ctx);

}  // namespace bench
