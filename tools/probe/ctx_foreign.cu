// Probe (nvcc -arch=sm_90 ctx_foreign.cu -lcuda): can the net transport's own context copy
// to and from the application's cudaMalloc buffers (memory of the primary context) while an
// application kernel spins? The transport's context reaches heap memory (virtual memory
// management) directly; a primary-context allocation it reaches only through the driver's
// copies between contexts.
//
// For each source memory (cudaMalloc of the primary context; a cuMemCreate mapping) and each
// stream of the spinning kernel (legacy default, a blocking stream, a non-blocking one), the
// time (also of a cudaMalloc buffer allocated after the second context was made, and of one
// allocated just before the row, first touched by the second context while the kernel spins)
// of a 256 KiB device-to-host and host-to-device copy (cudaMemcpyAsync, cudaMemcpyDefault,
// as the transport copies; also at an odd offset with an odd size) issued in the second context,
// bounded to 300 ms ("blocked": it did not end while the kernel spun), and a device-to-device
// copy into the second context's own memory by cuMemcpyPeerAsync naming both contexts.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#define CK(x)                                                                         \
  do {                                                                                \
    CUresult r_ = (x);                                                                \
    if (r_ != CUDA_SUCCESS) {                                                         \
      const char* s_ = nullptr;                                                       \
      cuGetErrorString(r_, &s_);                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void spin(volatile int* stop, unsigned long long max_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*stop == 0 && t - t0 < max_ns);
}

using Clock = std::chrono::steady_clock;

// Waits for `s` up to 300 ms: the microseconds it took, or -1.
static double bounded(CUstream s, Clock::time_point t0) {
  for (;;) {
    const CUresult r = cuStreamQuery(s);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (r == CUDA_SUCCESS) return us;
    if (r != CUDA_ERROR_NOT_READY) CK(r);
    if (us > 300e3) return -1;
  }
}

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext primary;
  CK(cuDevicePrimaryCtxRetain(&primary, dev));
  CK(cuCtxSetCurrent(primary));
  cudaSetDevice(0);
  const size_t bytes = 256 << 10;

  void* plain = nullptr;
  cudaMalloc(&plain, 2 << 20);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, 2 << 20, &prop, 0));
  CUdeviceptr vmm;
  CK(cuMemAddressReserve(&vmm, 2 << 20, 0, 0, 0));
  CK(cuMemMap(vmm, 2 << 20, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(vmm, 2 << 20, &acc, 1));
  void* host = nullptr;
  CK(cuMemHostAlloc(&host, 2 << 20, CU_MEMHOSTALLOC_PORTABLE));
  int* stop = nullptr;
  CK(cuMemHostAlloc(reinterpret_cast<void**>(&stop), 4096,
                    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  cudaStream_t blocking, nonblocking;
  cudaStreamCreate(&blocking);
  cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking);

  CUcontext second;
#if CUDA_VERSION >= 13000
  CK(cuCtxCreate(&second, nullptr, 0, dev));
#else
  CK(cuCtxCreate(&second, 0, dev));
#endif
  CUstream s2;
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUdeviceptr own;  // the second context's own memory: the peer copy's destination
  CK(cuMemAlloc(&own, 2 << 20));
  CK(cuCtxSetCurrent(primary));
  void* later = nullptr;  // allocated once the second context exists
  cudaMalloc(&later, 2 << 20);

  // Aligned, and at an odd offset with an odd size (the driver may copy those by a kernel).
  struct Mem { const char* name; CUdeviceptr p; size_t bytes; } mems[] = {
      {"cudaMalloc (primary)", reinterpret_cast<CUdeviceptr>(plain), bytes},
      {"cudaMalloc +1, odd", reinterpret_cast<CUdeviceptr>(plain) + 1, bytes - 1},
      {"cudaMalloc after ctx", reinterpret_cast<CUdeviceptr>(later) + 1, bytes - 1},
      {"fresh cudaMalloc", 0, bytes - 1},  // a new buffer each row: first touched here
      {"cuMemCreate", vmm, bytes}, {"cuMemCreate +1, odd", vmm + 1, bytes - 1}};
  struct App { const char* name; cudaStream_t s; } apps[] = {
      {"idle", nullptr}, {"legacy stream", nullptr}, {"blocking stream", blocking},
      {"non-blocking stream", nonblocking}};
  std::printf("%-22s %-20s %12s %12s %12s\n", "memory", "kernel on", "D2H us", "H2D us",
              "peer D2D us");
  for (const Mem& mem : mems)
    for (int a = 0; a < 4; ++a) {
      CK(cuCtxSetCurrent(primary));
      Mem m = mem;
      if (m.p == 0) {
        void* fresh = nullptr;
        if (cudaMalloc(&fresh, 2 << 20) != cudaSuccess) std::exit(1);
        m.p = reinterpret_cast<CUdeviceptr>(fresh) + 1;
      }
      *const_cast<volatile int*>(stop) = 0;
      if (a > 0) {
        spin<<<4, 128, 0, apps[a].s>>>(stop, 2000000000ull);
        if (cudaGetLastError() != cudaSuccess) std::exit(1);
        usleep(2000);  // the kernel runs
      }
      double t[3];
      CK(cuCtxSetCurrent(second));
      for (int k = 0; k < 3; ++k) {
        const auto t0 = Clock::now();
        if (k == 0)
          cudaMemcpyAsync(host, reinterpret_cast<void*>(m.p), m.bytes, cudaMemcpyDefault,
                          reinterpret_cast<cudaStream_t>(s2));
        if (k == 1)
          cudaMemcpyAsync(reinterpret_cast<void*>(m.p), host, m.bytes, cudaMemcpyDefault,
                          reinterpret_cast<cudaStream_t>(s2));
        if (k == 2) CK(cuMemcpyPeerAsync(own, second, m.p, primary, m.bytes, s2));
        if (cudaGetLastError() != cudaSuccess) std::exit(1);
        t[k] = bounded(s2, t0);
        if (t[k] < 0) {  // let the copy drain before the next one
          *const_cast<volatile int*>(stop) = 1;
          CK(cuStreamSynchronize(s2));
          *const_cast<volatile int*>(stop) = 0;
          if (a > 0) {
            CK(cuCtxSetCurrent(primary));
            spin<<<4, 128, 0, apps[a].s>>>(stop, 2000000000ull);
            CK(cuCtxSetCurrent(second));
          }
        }
      }
      *const_cast<volatile int*>(stop) = 1;
      CK(cuCtxSetCurrent(primary));
      CK(cuCtxSynchronize());
      auto show = [](double v) { return v < 0 ? std::string("blocked") : std::to_string(v); };
      std::printf("%-22s %-20s %12s %12s %12s\n", m.name, apps[a].name, show(t[0]).c_str(),
                  show(t[1]).c_str(), show(t[2]).c_str());
    }
  return 0;
}
