// --hold (StreamHold, bench.h): each timed batch starts behind a kernel that keeps the stream
// waiting until the host has enqueued the whole batch, so that the batch's time is the GPU's
// alone. Without it the batch's first event runs on an idle stream and the host's time to
// enqueue the first call is counted too, spread over the batch's calls (3 of 128 MiB, 100 of
// a few KiB; docs/performance.md, "Host time per call", has what it changed). nvbench holds
// its batches the same way.
//
// The kernel polls a word of mapped pinned memory for the batch's number. A call that waits
// for the GPU inside the batch (copy's all-to-all-v reads its counts back) could never be
// enqueued behind it: past kBoundNs the kernel gives up, says so in a second word, and
// time_stream_us times that point without the hold.
#include "bench.h"

namespace bench {
namespace {

constexpr uint64_t kBoundNs = 200ull * 1000 * 1000;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_kernel(const volatile uint32_t* go, uint32_t batch, uint32_t* gave_up) {
  const uint64_t t0 = global_ns();
  while (*go < batch)
    if (global_ns() - t0 > kBoundNs) {
      *gave_up = 1;
      return;
    }
}

}  // namespace

StreamHold::StreamHold() {
  BENCH_CUDA(cudaHostAlloc(&host_, 2 * sizeof(uint32_t), cudaHostAllocMapped));
  host_[0] = host_[1] = 0;
  BENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), host_, 0));
}

StreamHold::~StreamHold() { (void)cudaFreeHost(host_); }

void StreamHold::hold(cudaStream_t s) {
  ++batch_;
  hold_kernel<<<1, 1, 0, s>>>(dev_, batch_, dev_ + 1);
  BENCH_CUDA(cudaGetLastError());
}

void StreamHold::release() { __atomic_store_n(&host_[0], batch_, __ATOMIC_RELEASE); }

bool StreamHold::gave_up() {
  const bool gave = __atomic_load_n(&host_[1], __ATOMIC_ACQUIRE) != 0;
  host_[1] = 0;
  return gave;
}

}  // namespace bench
