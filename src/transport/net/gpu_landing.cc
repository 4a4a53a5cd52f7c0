#include "transport/net/gpu_landing.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/log.h"

namespace symcomm {

namespace {

// cuStreamBatchMemOp takes fewer than 256 operations at a time.
constexpr unsigned kBatch = 255;

class Batch {
 public:
  Batch(const CudaDriver& drv, CUstream stream) : drv_(drv), stream_(stream) {}
  // One word of `size` 4 or 8 bytes at `at`, its value read from `from` now.
  void write(uintptr_t at, const char* from, size_t size) {
    CUstreamBatchMemOpParams& p = next();
    p.writeValue.address = static_cast<CUdeviceptr>(at);
    if (size == 8) {
      p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      std::memcpy(&p.writeValue.value64, from, 8);
    } else {
      p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      std::memcpy(&p.writeValue.value, from, 4);
    }
  }
  void flush() {
    if (n_ == 0) return;
    SYMCOMM_CU(drv_, cuStreamBatchMemOp(stream_, n_, ops_, 0));
    n_ = 0;
  }

 private:
  CUstreamBatchMemOpParams& next() {
    if (n_ == kBatch) flush();
    CUstreamBatchMemOpParams& p = ops_[n_++];
    std::memset(&p, 0, sizeof p);
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    return p;
  }
  const CudaDriver& drv_;
  CUstream stream_;
  CUstreamBatchMemOpParams ops_[kBatch];
  unsigned n_ = 0;
};

void copy(void* dst, const void* src, size_t bytes, void* stream) {
  SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                 static_cast<cudaStream_t>(stream)));
}

// `rows` rows of `width` bytes, each `width` after the one before, both sides.
void copy_rows(char* dst, const char* src, size_t width, size_t rows, void* stream) {
  SYMCOMM_CUDART(cudaMemcpy2DAsync(dst, width, src, width, width, rows, cudaMemcpyHostToDevice,
                                   static_cast<cudaStream_t>(stream)));
}

// `bytes` (2 or more) as copies of 2 rows or more, which run on a copy engine however small
// (gpu_landing.h): the first 2 * (bytes / 2) bytes in 2 rows and, where bytes is odd, the last
// 3 bytes in 3 rows of one (two of them again, with the same values, later on one stream).
void copy_on_engine(void* dst, const void* src, size_t bytes, void* stream) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  copy_rows(d, s, bytes / 2, 2, stream);
  if (bytes % 2 != 0) copy_rows(d + bytes - 3, s + bytes - 3, 1, 3, stream);
}

}  // namespace

namespace {

// The stream's first work: a copy of kCopyEngineMinBytes to the GPU (LandingStreams).
void start_on_copy_engine(cudaStream_t stream) {
  void* host = nullptr;
  void* device = nullptr;
  SYMCOMM_CUDART(cudaHostAlloc(&host, kCopyEngineMinBytes, cudaHostAllocPortable));
  cudaError_t e = cudaMalloc(&device, kCopyEngineMinBytes);
  if (e == cudaSuccess) {
    std::memset(host, 0, kCopyEngineMinBytes);
    e = cudaMemcpyAsync(device, host, kCopyEngineMinBytes, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  }
  if (device) static_cast<void>(cudaFree(device));
  static_cast<void>(cudaFreeHost(host));
  SYMCOMM_CUDART(e);
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

LandingStreams::LandingStreams() {
  try {
    for (void** s : {&engine_, &compute_}) {
      cudaStream_t made = nullptr;
      SYMCOMM_CUDART(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking));
      *s = made;
    }
    start_on_copy_engine(as_stream(engine_));
  } catch (...) {
    for (void* s : {engine_, compute_})
      if (s && cudaStreamDestroy(as_stream(s)) != cudaSuccess) static_cast<void>(cudaGetLastError());
    throw;
  }
}

LandingStreams::~LandingStreams() {
  for (void* s : {engine_, compute_})
    if (cudaStreamDestroy(as_stream(s)) != cudaSuccess) static_cast<void>(cudaGetLastError());
}

void LandingStreams::land(const CudaDriver& drv, void* dst, const void* src, size_t bytes) {
  land_on_gpu(drv, dst, src, bytes, engine_, compute_);
}

void LandingStreams::sync(int64_t timeout_ms) {
  sync_within(compute_, timeout_ms);
  sync_within(engine_, timeout_ms);
}

void sync_within(void* stream, int64_t timeout_ms) {
  const cudaStream_t s = as_stream(stream);
  if (timeout_ms <= 0) {
    SYMCOMM_CUDART(cudaStreamSynchronize(s));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::milliseconds(timeout_ms);
  auto next_note = start + std::chrono::seconds(5);
  for (unsigned polls = 0;; ++polls) {
    const cudaError_t e = cudaStreamQuery(s);
    const auto now = std::chrono::steady_clock::now();
    if (e == cudaSuccess) {
      if (now - start > std::chrono::seconds(1))
        SYMCOMM_WARN("net transport: a copy into or out of GPU memory took %lld ms",
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                         now - start).count()));
      return;
    }
    if (e != cudaErrorNotReady) SYMCOMM_CUDART(e);
    if (now > next_note) {  // a copy that does not end is said while it lasts
      SYMCOMM_WARN("net transport: a copy into or out of GPU memory still runs after %lld s",
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(
                       now - start).count()));
      next_note += std::chrono::seconds(5);
    }
    if (now > end)
      SYMCOMM_THROW(symcommTimeout,
                    "the net transport's copy into or out of GPU memory did not finish within "
                    "%lld ms (SYMCOMM_WAIT_TIMEOUT): the GPU did not run the transport's work "
                    "(a kernel that spins on the GPU may hold it)",
                    static_cast<long long>(timeout_ms));
    // Most copies end within tens of microseconds: yield at first, then nap.
    if (polls < 2000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void land_on_gpu(const CudaDriver& drv, void* dst, const void* src, size_t bytes, void* engine,
                 void* compute) {
  if (bytes == 0) return;
  if (bytes >= kCopyEngineMinBytes) {
    copy(dst, src, bytes, engine);
    return;
  }
  const auto at = reinterpret_cast<uintptr_t>(dst);
  if (bytes <= kMemopMaxBytes && at % 4 == 0 && bytes % 4 == 0) {
    // Whole aligned words: stream memory operations, which take their values now.
    const char* from = static_cast<const char*>(src);
    Batch batch(drv, static_cast<CUstream>(engine));
    uintptr_t p = at;
    const uintptr_t end = at + bytes;
    if (p % 8 != 0 && p + 4 <= end) {
      batch.write(p, from, 4);
      p += 4;
    }
    for (; p + 8 <= end; p += 8) batch.write(p, from + (p - at), 8);
    if (p < end) batch.write(p, from + (p - at), 4);
    batch.flush();
    return;
  }
  if (bytes >= 2) {
    copy_on_engine(dst, src, bytes, engine);
    return;
  }
  copy(dst, src, bytes, compute);  // one byte: no copy engine takes it alone
}

}  // namespace symcomm
