// symcomm-bench net, cuda space: the 8-byte put-signal's one-way time from kernels, through
// the GPU-to-proxy ring (the device API to a member on another node): one thread of a kernel
// on each rank plays the round trips, rank 0 first, each put_signal answered by the other's
// once its signal arrived. A repetition is one kernel of --rounds x 5 round trips, timed on
// the host to its end; the median over --iters repetitions, after --warmup.
#include <cuda_runtime.h>

#include <vector>

#include "net_bench.h"
#include "symcomm/device.cuh"

namespace bench::net {

namespace {

__global__ void pingpong_kernel(const __grid_constant__ symcomm::DeviceComm c, char* dst,
                                const char* src, uint64_t* sig, uint64_t base, int rounds,
                                int peer, int first, int* rc) {
  if (threadIdx.x != 0) return;
  for (int r = 1; r <= rounds; ++r) {
    const uint64_t v = base + static_cast<uint64_t>(r);
    if (first) symcomm::put_signal(c, dst, src, 8, sig, v, symcommSignalSet, peer);
    const int w = symcomm::signal_wait_until(c, sig, symcommCmpGe, v);
    if (w != 0) {
      *rc = w;
      return;
    }
    if (!first) symcomm::put_signal(c, dst, src, 8, sig, v, symcommSignalSet, peer);
  }
}

}  // namespace

double device_pingpong_us(Setup& s, int rounds, bool* ok) {
  const Context& ctx = s.ctx;
  symcomm::DeviceComm h;
  BENCH_SC(symcommGetDeviceComm(ctx.comm, SYMCOMM_TEAM_WORLD, &h));
  int* rc = nullptr;
  BENCH_CUDA(cudaMalloc(&rc, sizeof(int)));
  BENCH_CUDA(cudaMemset(rc, 0, sizeof(int)));
  std::vector<double> times;
  for (int i = 0; i < ctx.opt.warmup + ctx.opt.iters; ++i) {
    barrier(ctx);
    const uint64_t base = s.round;  // the same on both ranks; signals only grow
    s.round += static_cast<uint64_t>(rounds);
    const double t0 = now_s();
    pingpong_kernel<<<1, 32, 0, ctx.stream>>>(h, s.dst, s.src, s.sig, base, rounds, s.peer,
                                               ctx.rank == 0, rc);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
    if (i >= ctx.opt.warmup) times.push_back((now_s() - t0) * 1e6 / (2.0 * rounds));
  }
  int failed = 0;
  BENCH_CUDA(cudaMemcpy(&failed, rc, sizeof failed, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaFree(rc));
  *ok = both(ctx, failed == 0);
  return median(times);
}

}  // namespace bench::net
