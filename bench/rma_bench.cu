// symcomm-bench rma: put bandwidth (copy engines, SM kernels, device block-scope puts) against
// NCCL send/recv of the same sizes, signal ping-pong latency (signal alone, and put_signal
// with 8 bytes of data the receiver checks: a wrong round fails the run), and on-stream
// barrier latency. Every put point (implementation and size) is first checked once: the
// receiver's buffer poisoned, one put of a pattern particular to the sender and the point,
// the receiver's copy compared with it (whole up to 64 MiB, sampled above) and the bytes
// after it still poisoned; the record says `verified`, and a wrong put makes the run exit 1.
//
// This file holds the entry point and the record of a point; the put series is in rma_put.cu,
// its check in rma_put_check.cu and the latencies in rma_latency.cu.
#include <cstdlib>
#include <string>
#include <utility>

#include "rma_bench.h"

namespace bench {

namespace rma {

Record point(const Context& ctx, const char* op, std::string impl, size_t bytes, double us,
             int ranks) {
  Record r;
  r.op = op;
  r.impl = std::move(impl);
  r.bytes = bytes;
  r.ranks = ranks;
  r.time_us = us;
  r.algbw_gbs = bytes ? static_cast<double>(bytes) / (us * 1e3) : -1;
  r.iters = ctx.opt.iters;
  r.warmup = ctx.opt.warmup;
  return r;
}

}  // namespace rma

int run_rma(Context& ctx) {
  if (ctx.nranks < 2) die("rma", "needs at least 2 ranks", __FILE__, __LINE__);
  const bool latency_only = std::getenv("SYMCOMM_BENCH_LATENCY_ONLY") != nullptr;
  char *dst, *src;
  BENCH_SC(symcommMalloc(ctx.comm, ctx.opt.max_bytes, reinterpret_cast<void**>(&dst)));
  BENCH_CUDA(cudaMalloc(&src, ctx.opt.max_bytes));
  BENCH_CUDA(cudaMemset(src, 0x5a, ctx.opt.max_bytes));
  BENCH_CUDA(cudaDeviceSynchronize());
  const int wrong_puts = latency_only ? 0 : rma::put_bandwidth(ctx, dst, src);
  const unsigned long long wrong = rma::latency(ctx);
  BENCH_CUDA(cudaFree(src));
  BENCH_SC(symcommFree(ctx.comm, dst));
  return wrong || wrong_puts ? 1 : 0;
}

}  // namespace bench
