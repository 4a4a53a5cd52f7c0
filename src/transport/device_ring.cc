#include "transport/device_ring.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/log.h"

namespace symcomm {

RingReader::RingReader(DeviceNetOp* slots, uint64_t capacity, uint64_t* freed, uint64_t* done)
    : slots_(slots), capacity_(capacity), freed_(freed), done_(done) {
  SYMCOMM_REQUIRE(capacity != 0 && (capacity & (capacity - 1)) == 0, symcommInternalError,
                  "a ring of %llu slots: not a power of 2",
                  static_cast<unsigned long long>(capacity));
}

bool RingReader::poll(const std::function<void(const DeviceNetOp&)>& run) {
  DeviceNetOp* slot = slots_ + (next_ & (capacity_ - 1));
  // The kernel wrote the fields, then (after a system-scope fence) the ticket.
  if (__atomic_load_n(&slot->ticket, __ATOMIC_ACQUIRE) != next_ + 1) return false;
  DeviceNetOp op;
  std::memcpy(&op, slot, sizeof op);
  const uint64_t ticket = next_++;
  __atomic_store_n(freed_, ticket + 1, __ATOMIC_RELEASE);  // the slot may be written again
  struct Count {  // done, however run() ends
    uint64_t* done;
    uint64_t value;
    ~Count() { __atomic_store_n(done, value, __ATOMIC_RELEASE); }
  } count{done_, ticket + 1};
  SYMCOMM_TRACE("ring ticket %llu: kind %u to rank %d, offset %llu, %llu bytes, signal word %llu "
                "%s %llu", static_cast<unsigned long long>(ticket), op.kind, op.pe,
                static_cast<unsigned long long>(op.offset),
                static_cast<unsigned long long>(op.bytes),
                static_cast<unsigned long long>(op.signal), op.op == 0 ? "set" : "add",
                static_cast<unsigned long long>(op.value));
  run(op);
  return true;
}

namespace {

constexpr size_t kCounters = 4 + kDeviceNetBounceSlots;
// Kernels write an inline payload as 8-byte words (ring_post_inline).
static_assert(offsetof(DeviceNetOp, data) % 8 == 0 && kDeviceNetInlineBytes % 8 == 0,
              "a descriptor's payload is written in 8-byte words");

}  // namespace

DeviceRing::DeviceRing(int device, const char* heap_lo, const char* heap_hi,
                       uint64_t inline_max)
    : device_(device) {
  SYMCOMM_REQUIRE(inline_max <= kDeviceNetInlineBytes, symcommInternalError,
                  "a ring whose descriptors carry %llu payload bytes (at most %llu)",
                  static_cast<unsigned long long>(inline_max),
                  static_cast<unsigned long long>(kDeviceNetInlineBytes));
  DeviceScope scope(device_);
  void* host = nullptr;
  SYMCOMM_CUDART(cudaHostAlloc(&host, sizeof(Mapped), cudaHostAllocMapped | cudaHostAllocPortable));
  mapped_ = static_cast<Mapped*>(host);
  std::memset(mapped_, 0, sizeof *mapped_);
  try {
    void* mapped_device = nullptr;
    SYMCOMM_CUDART(cudaHostGetDevicePointer(&mapped_device, host, 0));
    void* counters = nullptr;
    SYMCOMM_CUDART(cudaMalloc(&counters, kCounters * sizeof(unsigned long long)));
    counters_ = static_cast<unsigned long long*>(counters);
    SYMCOMM_CUDART(cudaMemset(counters_, 0, kCounters * sizeof(unsigned long long)));
    SYMCOMM_CUDART(cudaDeviceSynchronize());
    bounce_ = std::make_unique<VmmBuffer>(device_, kDeviceNetBounceSlots * kDeviceNetBounceBytes);
    Mapped* dev = static_cast<Mapped*>(mapped_device);
    view_.slots = dev->slots;
    view_.tail = counters_;
    view_.flushed = counters_ + 1;
    view_.freed = &dev->freed;
    view_.done = &dev->done;
    view_.capacity = kCapacity;
    view_.bounce = bounce_->data();
    view_.bounce_tail = counters_ + 2;
    view_.bounce_gen = reinterpret_cast<uint64_t*>(counters_ + 4);
    view_.heap_lo = heap_lo;
    view_.heap_hi = heap_hi;
    view_.inline_max = inline_max;
    reader_ = std::make_unique<RingReader>(mapped_->slots, kCapacity, &mapped_->freed,
                                           &mapped_->done);
  } catch (...) {
    bounce_.reset();
    if (counters_) cudaFree(counters_);
    cudaFreeHost(mapped_);
    throw;
  }
}

DeviceRing::~DeviceRing() {
  DeviceScope scope(device_);
  // A kernel still waiting on the ring when the communicator goes is the caller's error.
  bounce_.reset();
  if (cudaFree(counters_) != cudaSuccess) static_cast<void>(cudaGetLastError());
  if (cudaFreeHost(mapped_) != cudaSuccess) static_cast<void>(cudaGetLastError());
}

}  // namespace symcomm
