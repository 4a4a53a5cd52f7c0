#include "transport/net/local_memory.h"

#include <cuda_runtime.h>

#include <cstring>

#include "base/cuda_runtime_check.h"
#include "transport/net/copy_context.h"
#include "transport/net/wire.h"

namespace symcomm {

namespace {

class HostMemory final : public LocalMemory {
 public:
  void write(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void read(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void write_message(void* dst, const void* src, size_t bytes) override { write(dst, src, bytes); }
  void read_message(void* dst, const void* src, size_t bytes) override { read(dst, src, bytes); }
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
    for (char** p : {&in_, &out_}) {
      void* b = nullptr;
      SYMCOMM_CUDART(cudaHostAlloc(&b, wire::kEagerMax, cudaHostAllocPortable));
      *p = static_cast<char*>(b);
    }
  }
  ~CudaMemory() override {
    try {
      ContextScope guard(context_.get(), context_.device());  // the stream's
      for (cudaError_t e : {cudaStreamDestroy(stream_), cudaFreeHost(in_), cudaFreeHost(out_)})
        if (e != cudaSuccess) static_cast<void>(cudaGetLastError());
    } catch (const Error&) {
    }
  }
  void write(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void read(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void write_message(void* dst, const void* src, size_t bytes) override {
    SYMCOMM_REQUIRE(bytes <= wire::kEagerMax, symcommInternalError, "a message of %zu bytes",
                    bytes);
    std::memcpy(in_, src, bytes);
    copy(dst, in_, bytes);
  }
  void read_message(void* dst, const void* src, size_t bytes) override {
    SYMCOMM_REQUIRE(bytes <= wire::kEagerMax, symcommInternalError, "a message of %zu bytes",
                    bytes);
    copy(out_, src, bytes);
    std::memcpy(dst, out_, bytes);
  }
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
  char* in_ = nullptr;   // pinned: write_message's (the proxy's)
  char* out_ = nullptr;  // pinned: read_message's (the stream worker's)
};

}  // namespace

std::unique_ptr<LocalMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<LocalMemory> make_cuda_memory(const CopyContext& context, LoadStoreMover& mover) {
  return std::make_unique<CudaMemory>(context, mover);
}

}  // namespace symcomm
