// How the net transport's proxy touches this rank's memory when a peer's message asks it to:
// the host space copies with memcpy and updates words with CPU atomics; the cuda space writes
// with copy engines and stream memory operations on a stream of the proxy's (gpu_landing.h),
// sets signal words with cuStreamWriteValue64, and adds to them with the space's mover (rma),
// atomically with what the GPU's kernels do to them, or, for words with a single writer, as a
// read and a write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/transport.h"

namespace symcomm {

class LocalMemory {
 public:
  virtual ~LocalMemory() = default;
  // Copies between this rank's memory and host memory; complete when they return. The host
  // side is pinned memory (the staging inbox and outbox), never pageable: in the cuda space a
  // copy between pageable memory and the GPU waits for a lock of the driver's that an
  // application thread holds while its own pageable copy waits in its stream for this
  // transport (2 GPUs as 2 nodes, Threads.CommunicatorsUsedAtOnceFromThreads: three threads'
  // copies to std::vector and the worker's read of a put-signal's payload deadlocked).
  virtual void write(void* dst, const void* src, size_t bytes) = 0;
  virtual void read(void* dst, const void* src, size_t bytes) = 0;
  // The same for a message's payload (at most wire::kEagerMax bytes) in pageable memory, passed
  // through pinned buffers of its own: one for writes (the proxy's only) and one for reads
  // (the stream worker's only).
  virtual void write_message(void* dst, const void* src, size_t bytes) = 0;
  virtual void read_message(void* dst, const void* src, size_t bytes) = 0;
  // Release: what was written before is visible to whoever sees the new value.
  virtual void signal(uint64_t* word, uint64_t value, symcommSignalOp_t op) = 0;
  // A put-signal's payload, then its signal (`word` NULL: none): write_message, then signal;
  // a memory may do both with one wait.
  virtual void write_message_then_signal(void* dst, const void* src, size_t bytes,
                                         uint64_t* word, uint64_t value, symcommSignalOp_t op) {
    write_message(dst, src, bytes);
    if (word) signal(word, value, op);
  }
  // Transport::single_writer_words: an add to one of these words need not be atomic with
  // other writers' (there are none), only with this rank's own earlier ones.
  virtual void single_writer_words(const void* base, size_t bytes) {
    static_cast<void>(base), static_cast<void>(bytes);
  }
  // Whether host-side atomics (fetch-add, compare-swap) reach this memory: the host space only.
  virtual bool atomics() const { return false; }
};

std::unique_ptr<LocalMemory> make_host_memory();
class CopyContext;
// Copies and signals on a stream of `context` (copy_context.h).
std::unique_ptr<LocalMemory> make_cuda_memory(const CopyContext& context, LoadStoreMover& mover);

}  // namespace symcomm
