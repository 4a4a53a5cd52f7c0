// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/; or nvcc -arch=sm_90
// ctx_slices.cu -lcuda): where may the net transport's proxy do its GPU work (landing copies,
// signal writes) so that it is prompt while an application kernel spins on the GPU, and never
// queues behind an application stream that waits for the proxy?
//
// Executors: a second context (cuCtxCreate), a stream of the primary context, a green context
// (a few SMs of the device, cuGreenCtxCreate). Conditions: GPU idle; a kernel of the primary
// context spinning (with and without __nanosleep); 16 primary-context streams blocked in
// cuStreamWaitValue32 (each operation then bounded to 300 ms: "blocked" when it does not end).
// Prints the median and the largest time of each operation, in microseconds. `ctx_slices
// primers`: only the table of write64 after each primer on a fresh stream.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    CUresult r_ = (x);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char* s_ = nullptr;                                                  \
      cuGetErrorString(r_, &s_);                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

__global__ void spin(volatile int* stop, unsigned long long max_ns, int nap) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    if (nap) __nanosleep(200);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*stop == 0 && t - t0 < max_ns);
}
__global__ void tiny(int* p) { *p += 1; }

using Clock = std::chrono::steady_clock;
static double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// A new context on `dev`, current.
CUcontext new_context(CUdevice dev) {
  CUcontext c;
#if CUDA_VERSION >= 13000
  CK(cuCtxCreate(&c, nullptr, 0, dev));
#else
  CK(cuCtxCreate(&c, 0, dev));
#endif
  return c;
}

struct Executor {
  std::string name;
  CUcontext ctx;
  CUstream stream;
};

int main(int argc, char** argv) {
  const bool only_primers = argc > 1 && std::string(argv[1]) == "primers";
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext primary;
  CK(cuDevicePrimaryCtxRetain(&primary, dev));
  CK(cuCtxSetCurrent(primary));
  cudaSetDevice(0);

  // Device memory every context of the device reaches: virtual memory management.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t bytes = std::max<size_t>(gran, 4 << 20);
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, bytes, &prop, 0));
  CUdeviceptr dmem;
  CK(cuMemAddressReserve(&dmem, bytes, 0, 0, 0));
  CK(cuMemMap(dmem, bytes, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(dmem, bytes, &acc, 1));
  void* host = nullptr;
  CK(cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  int* flags = nullptr;  // [0]: the spinner's stop word, [1]: the blocked streams' word
  CK(cuMemHostAlloc(reinterpret_cast<void**>(&flags), 4096,
                    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr flags_dev;
  CK(cuMemHostGetDevicePointer(&flags_dev, flags, 0));

  std::vector<Executor> ex;
  {
    CUcontext c = new_context(dev);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ex.push_back({"second context", c, s});
    CK(cuCtxSetCurrent(primary));
  }
  {
    int lo = 0, hi = 0;
    CK(cuCtxGetStreamPriorityRange(&lo, &hi));
    CUstream s;
    CK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, hi));
    ex.push_back({"primary, own stream", primary, s});
  }
  {
    CUdevResource sm = {}, group = {}, rest = {};
    unsigned n = 1;
    CUresult r = cuDeviceGetDevResource(dev, &sm, CU_DEV_RESOURCE_TYPE_SM);
    if (r == CUDA_SUCCESS) r = cuDevSmResourceSplitByCount(&group, &n, &sm, &rest, 0, 8);
    CUdevResourceDesc desc;
    if (r == CUDA_SUCCESS) r = cuDevResourceGenerateDesc(&desc, &group, 1);
    CUgreenCtx g;
    if (r == CUDA_SUCCESS) r = cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    CUcontext c;
    CUstream s;
    if (r == CUDA_SUCCESS) r = cuCtxFromGreenCtx(&c, g);
    if (r == CUDA_SUCCESS) r = cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0);
    if (r == CUDA_SUCCESS) {
      ex.push_back({"green context (8 SMs)", c, s});
    } else {
      const char* e = nullptr;
      cuGetErrorString(r, &e);
      std::printf("green context: not available (%s)\n", e ? e : "?");
    }
    CK(cuCtxSetCurrent(primary));
  }

  CUdeviceptr host_dev;
  CK(cuMemHostGetDevicePointer(&host_dev, host, 0));
  // One copy through cuMemcpyBatchAsync, with the hint that it should overlap compute work.
  auto batch = [](CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    CUmemcpyAttributes attr = {};
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    size_t idx = 0;
    return cuMemcpyBatchAsync(&dst, &src, &n, 1, &attr, &idx, 1, s);
  };
  // One host-to-device copy as a 2D (or 3D) copy of `rows` rows: does the driver take a copy
  // engine for small pitched copies, where it runs a plain one below 32 KiB as compute work?
  auto h2d_2d = [&](size_t bytes, size_t rows, CUstream s) {
    CUDA_MEMCPY2D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcPitch = bytes / rows;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dmem;
    c.dstPitch = bytes / rows;
    c.WidthInBytes = bytes / rows;
    c.Height = rows;
    return cuMemcpy2DAsync(&c, s);
  };
  auto h2d_3d = [&](size_t bytes, CUstream s) {
    CUDA_MEMCPY3D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcPitch = bytes;
    c.srcHeight = 1;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dmem;
    c.dstPitch = bytes;
    c.dstHeight = 1;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return cuMemcpy3DAsync(&c, s);
  };
  using Op = std::function<CUresult(CUstream)>;
  std::vector<std::pair<std::string, Op>> ops = {
      {"H2D 8 B", [&](CUstream s) { return cuMemcpyHtoDAsync(dmem, host, 8, s); }},
      {"H2D 4 KiB", [&](CUstream s) { return cuMemcpyHtoDAsync(dmem, host, 4096, s); }},
      {"H2D 32 KiB", [&](CUstream s) { return cuMemcpyHtoDAsync(dmem, host, 32768, s); }},
      {"H2D 1 MiB", [&](CUstream s) { return cuMemcpyHtoDAsync(dmem, host, 1 << 20, s); }},
      {"H2D 8 KiB", [&](CUstream s) { return cuMemcpyHtoDAsync(dmem, host, 8192, s); }},
      {"H2D 16 KiB", [&](CUstream s) { return cuMemcpyHtoDAsync(dmem, host, 16384, s); }},
      {"2D H2D 16 KiB 1 row", [&](CUstream s) { return h2d_2d(16384, 1, s); }},
      {"2D H2D 16 KiB 16 rows", [&](CUstream s) { return h2d_2d(16384, 16, s); }},
      {"2D H2D 16 KiB 2048 rows", [&](CUstream s) { return h2d_2d(16384, 2048, s); }},
      {"2D H2D 4 KiB 1 row", [&](CUstream s) { return h2d_2d(4096, 1, s); }},
      {"2D H2D 8 B 1 row", [&](CUstream s) { return h2d_2d(8, 1, s); }},
      {"2D H2D 16 KiB 2 rows", [&](CUstream s) { return h2d_2d(16384, 2, s); }},
      {"2D H2D 8 B 2 rows", [&](CUstream s) { return h2d_2d(8, 2, s); }},
      {"2D H2D 2 B 2 rows", [&](CUstream s) { return h2d_2d(2, 2, s); }},
      {"2D H2D 4 KiB 2 rows", [&](CUstream s) { return h2d_2d(4096, 2, s); }},
      {"2D H2D 30 KiB 2 rows", [&](CUstream s) { return h2d_2d(30720, 2, s); }},
      {"2D H2D 4094 B 2 rows odd dst", [&](CUstream s) {
         CUDA_MEMCPY2D c = {};
         c.srcMemoryType = CU_MEMORYTYPE_HOST;
         c.srcHost = static_cast<char*>(host) + 3;
         c.srcPitch = 2047;
         c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
         c.dstDevice = dmem + 1;
         c.dstPitch = 2047;
         c.WidthInBytes = 2047;
         c.Height = 2;
         return cuMemcpy2DAsync(&c, s);
       }},
      {"3D H2D 16 KiB", [&](CUstream s) { return h2d_3d(16384, s); }},
      {"3D H2D 8 B", [&](CUstream s) { return h2d_3d(8, s); }},
      {"batch H2D 8 B overlap", [&](CUstream s) { return batch(dmem, host_dev, 8, s); }},
      {"batch H2D 4 KiB overlap", [&](CUstream s) { return batch(dmem, host_dev, 4096, s); }},
      {"D2D 8 B", [&](CUstream s) { return cuMemcpyDtoDAsync(dmem + 4096, dmem, 8, s); }},
      {"D2D 4 KiB", [&](CUstream s) { return cuMemcpyDtoDAsync(dmem + 8192, dmem, 4096, s); }},
      {"batch D2D 8 B overlap", [&](CUstream s) { return batch(dmem + 4096, dmem, 8, s); }},
      {"D2H 8 B", [&](CUstream s) { return cuMemcpyDtoHAsync(host, dmem, 8, s); }},
      {"D2H 32 KiB", [&](CUstream s) { return cuMemcpyDtoHAsync(host, dmem, 32768, s); }},
      {"write64", [&](CUstream s) { return cuStreamWriteValue64(s, dmem + 64, 5, 0); }},
      {"write32", [&](CUstream s) { return cuStreamWriteValue32(s, dmem + 96, 5, 0); }},
      {"batch write64", [&](CUstream s) {
         CUstreamBatchMemOpParams p;
         std::memset(&p, 0, sizeof p);
         p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
         p.writeValue.address = dmem + 72;
         p.writeValue.value64 = 9;
         return cuStreamBatchMemOp(s, 1, &p, 0);
       }},
      {"write64 no barrier",
       [&](CUstream s) {
         return cuStreamWriteValue64(s, dmem + 64, 5, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER);
       }},
      {"memset32 1 word", [&](CUstream s) { return cuMemsetD32Async(dmem + 128, 3, 1, s); }},
      {"kernel", [&](CUstream s) {
         tiny<<<1, 1, 0, reinterpret_cast<cudaStream_t>(s)>>>(reinterpret_cast<int*>(dmem + 256));
         return static_cast<CUresult>(cudaGetLastError() == cudaSuccess ? CUDA_SUCCESS
                                                                         : CUDA_ERROR_UNKNOWN);
       }},
  };

  auto measure = [&](const Executor& e, const std::string& name, const Op& op, double bound_us,
                     int reps) {
    // cuMemcpyBatchAsync on a green context's stream crashed inside driver 580.
    if (e.name.rfind("green", 0) == 0 && name.rfind("batch", 0) == 0)
      return std::string("  (crashes)             ");
    std::vector<double> t;
    int blocked = 0;
    for (int i = 0; i < reps && !blocked; ++i) {
      CK(cuCtxSetCurrent(e.ctx));
      auto t0 = Clock::now();
      if (op(e.stream) != CUDA_SUCCESS) {
        cudaGetLastError();
        CK(cuCtxSetCurrent(primary));
        return std::string("  error                 ");
      }
      CUresult q;
      while ((q = cuStreamQuery(e.stream)) == CUDA_ERROR_NOT_READY && us_since(t0) < bound_us) {
      }
      if (q == CUDA_ERROR_NOT_READY) {
        blocked = 1;
      } else {
        CK(q);
        t.push_back(us_since(t0));
      }
    }
    CK(cuCtxSetCurrent(primary));
    char buf[96];
    if (blocked) {
      std::snprintf(buf, sizeof buf, "%9s", "blocked");
      return std::string(buf);
    }
    std::sort(t.begin(), t.end());
    std::snprintf(buf, sizeof buf, "%8.1f/%-8.1f", t[t.size() / 2], t.back());
    return std::string(buf);
  };

  auto table = [&](const char* condition, double bound_us, int reps) {
    std::printf("\n== %s (median/max us over %d)\n%-22s", condition, reps, "");
    for (auto& e : ex) std::printf("%-24s", e.name.c_str());
    std::printf("\n");
    for (auto& [name, op] : ops) {
      std::printf("%-22s", name.c_str());
      for (auto& e : ex) std::printf("%-24s", measure(e, name, op, bound_us, reps).c_str());
      std::printf("\n");
      std::fflush(stdout);
    }
  };

  // Warm every executor (lazy module loading, first-use costs).
  for (auto& e : ex)
    for (auto& [name, op] : ops) measure(e, name, op, 5e6, 2);

  if (!only_primers) table("idle GPU", 1e6, 20);

  CUstream app;
  CK(cuStreamCreate(&app, CU_STREAM_NON_BLOCKING));

  // Does a stream memory operation's speed beside a spinning kernel depend on what the stream
  // did before it (which of the context's hardware channels the driver puts it in)? A fresh
  // stream of the second context per primer; the primer runs once, then write64 five times.
  {
    flags[0] = 0;
    spin<<<1, 32, 0, reinterpret_cast<cudaStream_t>(app)>>>(
        reinterpret_cast<volatile int*>(flags_dev), 20ull * 1000 * 1000 * 1000, 0);
    CK(static_cast<CUresult>(cudaGetLastError()));
    std::printf("\n== write64 on a fresh stream of the second context after a primer, a kernel "
                "spinning (median/max us over 5)\n");
    const Executor& second = ex[0];
    for (const char* primer : {"(none)", "D2H 8 B", "D2H 32 KiB", "H2D 32 KiB", "H2D 8 B",
                               "write64", "H2D 32 KiB then H2D 8 B", "batch write64"}) {
      CK(cuCtxSetCurrent(second.ctx));
      CUstream s;
      CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      Executor e{second.name, second.ctx, s};
      std::string p = primer;
      auto find = [&](const std::string& n) -> const Op& {
        for (auto& [name, op] : ops)
          if (name == n) return op;
        std::abort();
      };
      if (p == "H2D 32 KiB then H2D 8 B") {
        measure(e, "H2D 32 KiB", find("H2D 32 KiB"), 1e7, 1);
        measure(e, "H2D 8 B", find("H2D 8 B"), 1e7, 1);
      } else if (p != "(none)") {
        measure(e, p, find(p), 1e7, 1);
      }
      std::printf("%-26s %s", primer, measure(e, "write64", find("write64"), 1e6, 5).c_str());
      std::printf(" then batch write64 %s",
                  measure(e, "bw", find("batch write64"), 1e6, 5).c_str());
      std::printf(" then write64 %s\n", measure(e, "write64", find("write64"), 1e6, 5).c_str());
      CK(cuCtxSetCurrent(second.ctx));
      CK(cuStreamDestroy(s));
      CK(cuCtxSetCurrent(primary));
    }
    {
      CK(cuCtxSetCurrent(second.ctx));
      CUstream s;
      CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      Executor e{second.name, second.ctx, s};
      auto find = [&](const std::string& n) -> const Op& {
        for (auto& [name, op] : ops)
          if (name == n) return op;
        std::abort();
      };
      std::printf("%-26s batch write64 %s", "fresh stream",
                  measure(e, "bw", find("batch write64"), 1e6, 5).c_str());
      std::printf(" then D2H 8 B %s", measure(e, "D2H 8 B", find("D2H 8 B"), 1e6, 5).c_str());
      std::printf(" then batch write64 %s\n",
                  measure(e, "bw", find("batch write64"), 1e6, 5).c_str());
      CK(cuCtxSetCurrent(second.ctx));
      CK(cuStreamDestroy(s));
      CK(cuCtxSetCurrent(primary));
    }
    // A new context per sequence, as a rank's proxy has: does its first operation decide?
    std::printf("\n== sequences on a new context's first stream, a kernel spinning\n");
    const std::vector<std::vector<std::string>> sequences = {
        {"D2H 8 B", "write64", "write64", "write64"},
        {"write64", "write64", "write64"},
        {"batch write64", "batch write64", "batch write64"},
        {"D2H 8 B", "batch write64", "batch write64"},
        {"H2D 32 KiB", "D2H 8 B", "write64", "batch write64", "write64"},
        {"D2H 32 KiB", "D2H 8 B", "write64", "batch write64"},
    };
    for (const auto& seq : sequences) {
      CUcontext c = new_context(dev);
      CUstream st;
      CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
      Executor e{"new", c, st};
      for (const std::string& n : seq) {
        const Op* op = nullptr;
        for (auto& [name, o] : ops)
          if (name == n) op = &o;
        std::printf(" %s %s |", n.c_str(), measure(e, n, *op, 1e6, 1).c_str());
      }
      std::printf("\n");
      CK(cuCtxSetCurrent(c));
      CK(cuStreamDestroy(st));
      CK(cuCtxDestroy(c));
      CK(cuCtxSetCurrent(primary));
    }
    __atomic_store_n(&flags[0], 1, __ATOMIC_SEQ_CST);
    CK(cuStreamSynchronize(app));
  }
  for (int nap = 0; nap < 2 && !only_primers; ++nap) {
    flags[0] = 0;
    spin<<<1, 32, 0, reinterpret_cast<cudaStream_t>(app)>>>(
        reinterpret_cast<volatile int*>(flags_dev), 20ull * 1000 * 1000 * 1000, nap);
    CK(static_cast<CUresult>(cudaGetLastError()));
    table(nap ? "a primary-context kernel spinning with __nanosleep(200)"
              : "a primary-context kernel spinning",
          1e6, 10);
    __atomic_store_n(&flags[0], 1, __ATOMIC_SEQ_CST);
    CK(cuStreamSynchronize(app));
  }

  if (only_primers) return 0;
  // 16 application streams that wait (a stream memory operation) for a word nobody sets yet.
  flags[1] = 0;
  std::vector<CUstream> waiting(16);
  for (auto& s : waiting) {
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamWaitValue32(s, flags_dev + 4, 1, CU_STREAM_WAIT_VALUE_GEQ));
  }
  table("16 primary-context streams waiting in cuStreamWaitValue32 (bound 300 ms)", 3e5, 3);
  __atomic_store_n(&flags[1], 1, __ATOMIC_SEQ_CST);
  for (auto& s : waiting) CK(cuStreamSynchronize(s));
  std::printf("\ndone\n");
  return 0;
}
