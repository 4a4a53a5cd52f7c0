#include "transport/net/local_memory.h"

#include <cuda_runtime.h>

#include <cstring>

#include "base/cuda_runtime_check.h"

namespace symcomm {

namespace {

class HostMemory final : public LocalMemory {
 public:
  void write(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void read(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void signal(uint64_t* word, uint64_t value, symcommSignalOp_t op) override {
    if (op == symcommSignalAdd) __atomic_fetch_add(word, value, __ATOMIC_RELEASE);
    else __atomic_store_n(word, value, __ATOMIC_RELEASE);
  }
  bool atomics() const override { return true; }
};

class CudaMemory final : public LocalMemory {
 public:
  CudaMemory(int device, LoadStoreMover& mover) : device_(device), mover_(mover) {
    DeviceScope guard(device_);
    // Non-blocking: the copies must not wait for the legacy stream, nor for kernels of this
    // rank that wait for them (a barrier's arrival, a signal).
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaMemory() override {
    if (cudaStreamDestroy(stream_) != cudaSuccess) static_cast<void>(cudaGetLastError());
  }
  void write(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void read(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void signal(uint64_t* word, uint64_t value, symcommSignalOp_t op) override {
    DeviceScope guard(device_);
    mover_.signal(word, value, op, stream_);
    SYMCOMM_CUDART(cudaStreamSynchronize(stream_));
  }

 private:
  void copy(void* dst, const void* src, size_t bytes) {
    DeviceScope guard(device_);
    SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(stream_));
  }

  int device_;
  LoadStoreMover& mover_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<LocalMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<LocalMemory> make_cuda_memory(int device, LoadStoreMover& mover) {
  return std::make_unique<CudaMemory>(device, mover);
}

}  // namespace symcomm
