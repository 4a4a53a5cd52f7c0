#include "transport/net/local_memory.h"

#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "rma/wait.h"
#include "transport/net/copy_context.h"
#include "transport/net/gpu_landing.h"
#include "transport/net/wire.h"
#include "transport/trace.h"

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
    streams_ = std::make_unique<LandingStreams>();
    stream_ = static_cast<cudaStream_t>(streams_->engine());
    for (char** p : {&in_, &out_}) {
      void* b = nullptr;
      SYMCOMM_CUDART(cudaHostAlloc(&b, wire::kEagerMax, cudaHostAllocPortable));
      *p = static_cast<char*>(b);
    }
    void* w = nullptr;
    SYMCOMM_CUDART(cudaHostAlloc(&w, sizeof(uint64_t), cudaHostAllocPortable));
    read_word_ = static_cast<uint64_t*>(w);
  }
  ~CudaMemory() override {
    try {
      ContextScope guard(context_.get(), context_.device());  // the stream's
      streams_.reset();
      for (cudaError_t e : {cudaFreeHost(in_), cudaFreeHost(out_), cudaFreeHost(read_word_)})
        if (e != cudaSuccess) static_cast<void>(cudaGetLastError());
    } catch (const Error&) {
    }
  }
  void write(void* dst, const void* src, size_t bytes) override { land(dst, src, bytes); }
  void read(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void write_message(void* dst, const void* src, size_t bytes) override {
    land(dst, pinned_message(src, bytes), bytes);
  }
  void write_message_then_signal(void* dst, const void* src, size_t bytes, uint64_t* word,
                                 uint64_t value, symcommSignalOp_t op) override {
    // The landing, then a set: every operation on the engine stream, in order (the set's
    // barrier after the landing), waited for once.
    if (!word || op != symcommSignalSet || !lands_on_engine(bytes)) {
      write_message(dst, src, bytes);
      if (word) signal(word, value, op);
      return;
    }
    trace::Scope t("gpu land and signal");
    ContextScope guard(context_.get(), context_.device());
    streams_->land(drv_, dst, pinned_message(src, bytes), bytes);
    SYMCOMM_CU(drv_, cuStreamWriteValue64(static_cast<CUstream>(stream_),
                                          reinterpret_cast<CUdeviceptr>(word), value,
                                          CU_STREAM_WRITE_VALUE_DEFAULT));
    sync_within(stream_, timeout_ms_);
  }
  void read_message(void* dst, const void* src, size_t bytes) override {
    trace::Scope t("gpu read_message");
    SYMCOMM_REQUIRE(bytes <= wire::kEagerMax, symcommInternalError, "a message of %zu bytes",
                    bytes);
    copy(out_, src, bytes);
    std::memcpy(dst, out_, bytes);
  }
  void signal(uint64_t* word, uint64_t value, symcommSignalOp_t op) override {
    trace::Scope t("gpu signal");
    ContextScope guard(context_.get(), context_.device());
    if (op == symcommSignalAdd && single_writer(word)) {
      // Nobody else changes the word: its value plus `value`, read and written without a
      // kernel of this context's, which would wait out an application kernel's time slice.
      SYMCOMM_CUDART(cudaMemcpyAsync(read_word_, word, sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                     stream_));
      sync_within(stream_, timeout_ms_);
      op = symcommSignalSet;
      value += *read_word_;
    }
    if (op == symcommSignalSet) {
      // The default flags put a memory barrier before the write: what landed before is visible
      // first.
      SYMCOMM_CU(drv_, cuStreamWriteValue64(static_cast<CUstream>(stream_),
                                            reinterpret_cast<CUdeviceptr>(word), value,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
      sync_within(stream_, timeout_ms_);
    } else {
      // A kernel, atomic with the GPU's own adds; on the compute stream (LandingStreams).
      mover_.signal(word, value, op, static_cast<symcommStream_t>(streams_->compute()));
      sync_within(streams_->compute(), timeout_ms_);
    }
  }
  void single_writer_words(const void* base, size_t bytes) override {
    std::lock_guard<std::mutex> lock(ranges_mutex_);
    const auto b = reinterpret_cast<uintptr_t>(base);
    ranges_.emplace_back(b, b + bytes);
  }

 private:
  // A message's payload copied into in_ (pinned: write_message's, the proxy's only).
  const char* pinned_message(const void* src, size_t bytes) {
    SYMCOMM_REQUIRE(bytes <= wire::kEagerMax, symcommInternalError, "a message of %zu bytes",
                    bytes);
    std::memcpy(in_, src, bytes);
    return in_;
  }
  bool single_writer(const uint64_t* word) {
    const auto w = reinterpret_cast<uintptr_t>(word);
    std::lock_guard<std::mutex> lock(ranges_mutex_);
    for (const auto& [b, e] : ranges_)
      if (w >= b && w + sizeof(uint64_t) <= e) return true;
    return false;
  }
  void land(void* dst, const void* src, size_t bytes) {
    trace::Scope t("gpu land");
    ContextScope guard(context_.get(), context_.device());
    streams_->land(drv_, dst, src, bytes);
    streams_->sync(timeout_ms_);
  }
  void copy(void* dst, const void* src, size_t bytes) {
    ContextScope guard(context_.get(), context_.device());
    SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
    sync_within(stream_, timeout_ms_);
  }

  const CudaDriver& drv_ = cuda_driver();
  const CopyContext& context_;
  LoadStoreMover& mover_;
  const int64_t timeout_ms_ = wait_timeout_ms();  // each copy's bound (sync_within)
  std::unique_ptr<LandingStreams> streams_;
  cudaStream_t stream_ = nullptr;  // streams_->engine(): reads, memory operations
  char* in_ = nullptr;   // pinned: write_message's (the proxy's)
  char* out_ = nullptr;  // pinned: read_message's (the stream worker's)
  uint64_t* read_word_ = nullptr;  // pinned: signal's (the proxy's)
  std::mutex ranges_mutex_;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;  // single_writer_words
};

}  // namespace

std::unique_ptr<LocalMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<LocalMemory> make_cuda_memory(const CopyContext& context, LoadStoreMover& mover) {
  return std::make_unique<CudaMemory>(context, mover);
}

}  // namespace symcomm
