// symcomm-bench rma: put bandwidth from rank 0 to rank 1, stream-serialised, for every size
// up to --max-bytes: the host API on each engine, the runtime's and the driver's own copy
// calls on the peer address (small sizes), device block-scope puts, and NCCL send/recv of
// the same size as the baseline. Every point is checked once first (rma_put_check.cu).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "rma_bench.h"
#include "symcomm/device.cuh"

namespace bench::rma {

namespace {

using symcomm::DeviceComm;

__global__ void device_put_kernel(const __grid_constant__ DeviceComm c, char* dst, const char* src,
                                  size_t bytes, int pe) {
  size_t per = (bytes + gridDim.x - 1) / gridDim.x;
  size_t begin = per * blockIdx.x;
  if (begin >= bytes) return;
  size_t n = bytes - begin < per ? bytes - begin : per;
  symcomm::put_block(c, dst + begin, src + begin, n, pe);
}

std::vector<size_t> sizes(size_t max_bytes) {
  std::vector<size_t> v;
  for (size_t b = 8; b <= max_bytes; b *= 8) v.push_back(b);
  for (size_t b : {size_t{8} << 10, size_t{64} << 20, size_t{256} << 20, size_t{1} << 30})
    if (b <= max_bytes && std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  std::sort(v.begin(), v.end());
  return v;
}

int inner_for(size_t bytes) { return bytes <= (1 << 20) ? 100 : bytes <= (64 << 20) ? 10 : 2; }

// cuMemcpyAsync from the driver, found through the runtime (no -lcuda).
using MemcpyAsyncFn = int (*)(uintptr_t, uintptr_t, size_t, cudaStream_t);
MemcpyAsyncFn driver_memcpy_async() {
  static MemcpyAsyncFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    BENCH_CUDA(cudaGetDriverEntryPointByVersion("cuMemcpyAsync", &p, 12000, cudaEnableDefault, &q));
    if (!p) die("cuMemcpyAsync", "not found", __FILE__, __LINE__);
    return reinterpret_cast<MemcpyAsyncFn>(p);
  }();
  return fn;
}
#define BENCH_CU(call) \
  do { if (int rc_ = (call)) die(#call, ("CUresult " + std::to_string(rc_)).c_str(), __FILE__, __LINE__); } while (0)

}  // namespace

// Returns the number of points whose check failed (check_put; their records say
// "verified": false).
int put_bandwidth(Context& ctx, char* dst, char* src) {
  print_header(ctx, "Put GPU0 -> GPU1, stream-serialised (rank 0 issues; time per put)");
  DeviceComm h;
  BENCH_SC(symcommGetDeviceComm(ctx.comm, SYMCOMM_TEAM_WORLD, &h));
  if (!ctx.nccl) ctx.nccl = make_nccl(ctx);
  const size_t capacity = ctx.opt.max_bytes;  // of dst and src
  uint64_t points = 0;
  int failed = 0;
  // The point's check: `put` makes the one put on rank 0 (and NCCL's receive on rank 1) into
  // `recv`, rank 1's buffer.
  auto check = [&](const std::string& impl, size_t bytes, char* recv,
                   const std::function<void()>& put) {
    const bool ok = check_put(ctx, impl, src, recv, bytes, capacity, ++points, put);
    failed += !ok;
    return ok;
  };
  auto emit_put = [&](const std::string& impl, size_t bytes, double us, bool ok) {
    Record r = point(ctx, "put", impl, bytes, us, 2);
    r.extra.push_back({"verified", ok ? "true" : "false"});
    emit(ctx, r);
  };
  for (size_t bytes : sizes(ctx.opt.max_bytes)) {
    const int inner = inner_for(bytes);
    auto host_put = [&](symcommEngine_t e) {
      return [&, e] { BENCH_SC(symcommPutOnStream(ctx.comm, dst, src, bytes, 1, e, ctx.stream)); };
    };
    const struct {
      const char* impl;
      symcommEngine_t engine;
    } engines[] = {{"symcomm:ce", symcommEngineCe}, {"symcomm:sm", symcommEngineSm},
                   {"symcomm:auto", symcommEngineAuto}};
    for (const auto& e : engines) {
      const bool ok = check(e.impl, bytes, dst, [&] { if (ctx.rank == 0) host_put(e.engine)(); });
      double us = 0;
      if (ctx.rank == 0) us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, host_put(e.engine));
      BENCH_SC(symcommHostBarrier(ctx.comm));
      emit_put(e.impl, bytes, us, ok);
    }
    // The floor under the host API for small puts: the runtime's (and the driver's) own copy
    // call on the peer address, without symcomm around it.
    if (bytes <= (64 << 10)) {
      void* peer = symcommPtr(ctx.comm, dst, 1);
      const bool rt_ok = check("raw:cudaMemcpyAsync", bytes, dst, [&] {
        if (ctx.rank == 0) BENCH_CUDA(cudaMemcpyAsync(peer, src, bytes, cudaMemcpyDefault, ctx.stream));
      });
      const bool drv_ok = check("raw:cuMemcpyAsync", bytes, dst, [&] {
        if (ctx.rank == 0)
          BENCH_CU(driver_memcpy_async()(reinterpret_cast<uintptr_t>(peer),
                                         reinterpret_cast<uintptr_t>(src), bytes, ctx.stream));
      });
      double rt = 0, drv = 0;
      if (ctx.rank == 0) {
        rt = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
          BENCH_CUDA(cudaMemcpyAsync(peer, src, bytes, cudaMemcpyDefault, ctx.stream));
        });
        drv = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
          BENCH_CU(driver_memcpy_async()(reinterpret_cast<uintptr_t>(peer),
                                         reinterpret_cast<uintptr_t>(src), bytes, ctx.stream));
        });
      }
      BENCH_SC(symcommHostBarrier(ctx.comm));
      emit_put("raw:cudaMemcpyAsync", bytes, rt, rt_ok);
      emit_put("raw:cuMemcpyAsync", bytes, drv, drv_ok);
    }
    for (unsigned blocks : {32u, 132u}) {
      double us = 0;
      unsigned grid = static_cast<unsigned>(std::min<size_t>(blocks, (bytes + 4095) / 4096));
      const std::string impl = "symcomm:device_block_x" + std::to_string(blocks);
      const bool ok = check(impl, bytes, dst, [&] {
        if (ctx.rank == 0) device_put_kernel<<<grid, 1024, 0, ctx.stream>>>(h, dst, src, bytes, 1);
      });
      if (ctx.rank == 0)
        us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
          device_put_kernel<<<grid, 1024, 0, ctx.stream>>>(h, dst, src, bytes, 1);
        });
      BENCH_CUDA(cudaGetLastError());
      BENCH_SC(symcommHostBarrier(ctx.comm));
      emit_put(impl, bytes, us, ok);
    }
    // NCCL send/recv of the same size: rank 0 sends, rank 1 receives (into its own src), same
    // repetitions.
    const bool nccl_ok = check("nccl:sendrecv", bytes, src, [&] {
      if (ctx.rank == 0) BENCH_NCCL(ncclSend(src, bytes, ncclChar, 1, ctx.nccl, ctx.stream));
      else if (ctx.rank == 1) BENCH_NCCL(ncclRecv(src, bytes, ncclChar, 0, ctx.nccl, ctx.stream));
    });
    double us = 0;
    if (ctx.rank <= 1) {
      us = time_stream_us(ctx.stream, ctx.opt.warmup, ctx.opt.iters, inner, [&] {
        if (ctx.rank == 0) BENCH_NCCL(ncclSend(src, bytes, ncclChar, 1, ctx.nccl, ctx.stream));
        else BENCH_NCCL(ncclRecv(src, bytes, ncclChar, 0, ctx.nccl, ctx.stream));
      });
    }
    std::vector<double> all(static_cast<size_t>(ctx.nranks));
    BENCH_SC(symcommHostAllgather(ctx.comm, &us, all.data(), sizeof us));
    emit_put("nccl:sendrecv", bytes, all[0], nccl_ok);
  }
  if (failed && ctx.rank == 0)
    std::fprintf(stderr, "symcomm-bench rma: FAILED: %d put point(s) delivered wrong data\n", failed);
  return failed;
}

}  // namespace bench::rma
