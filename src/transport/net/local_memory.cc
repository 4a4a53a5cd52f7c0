#include "transport/net/local_memory.h"

#include <cuda_runtime.h>

#include <cstring>

#include "base/cuda_runtime_check.h"
#include "transport/net/copy_context.h"

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
  CudaMemory(const CopyContext& context, LoadStoreMover& mover)
      : context_(context), mover_(mover) {
    ContextScope guard(context_.get(), context_.device());
    // Of the transport's own context, and non-blocking: the copies must not wait for the
    // application's streams, which wait for them (a barrier's arrival, a signal).
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaMemory() override {
    try {
      ContextScope guard(context_.get(), context_.device());  // the stream's
      if (cudaStreamDestroy(stream_) != cudaSuccess) static_cast<void>(cudaGetLastError());
    } catch (const Error&) {
    }
  }
  void write(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void read(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void signal(uint64_t* word, uint64_t value, symcommSignalOp_t op) override {
    ContextScope guard(context_.get(), context_.device());
    mover_.signal(word, value, op, stream_);
    SYMCOMM_CUDART(cudaStreamSynchronize(stream_));
  }

 private:
  void copy(void* dst, const void* src, size_t bytes) {
    ContextScope guard(context_.get(), context_.device());
    SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
    SYMCOMM_CUDART(cudaStreamSynchronize(stream_));
  }

  const CopyContext& context_;
  LoadStoreMover& mover_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<LocalMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<LocalMemory> make_cuda_memory(const CopyContext& context, LoadStoreMover& mover) {
  return std::make_unique<CudaMemory>(context, mover);
}

}  // namespace symcomm
