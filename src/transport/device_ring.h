// The host side of the GPU-to-proxy ring (DeviceNetRing in symcomm/device_comm.h; the
// kernels' side is symcomm/detail/device_ring.cuh): how the device API reaches team members
// that are not mapped (ranks on other nodes). Kernels take tickets and write descriptors into
// slots of mapped host memory; a transport's worker thread reads them in ticket order
// (RingReader::poll), frees each slot as soon as it has copied the descriptor, carries the
// operation out, and counts it in `done`, which the kernels wait on.
//
// One ring per rank, made by the transport at the first device handle of a team with such
// members (symcommGetDeviceComm), shared by every team's handles: a descriptor names the
// world rank and heap offsets, which mean the same in every team.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "symcomm/device_comm.h"
#include "transport/vmm_buffer.h"

namespace symcomm {

// The reading side over given memory (the GPU-mapped ring here; plain memory in tests).
class RingReader {
 public:
  // `capacity`: a power of 2.
  RingReader(DeviceNetOp* slots, uint64_t capacity, uint64_t* freed, uint64_t* done);

  // If the next ticket's descriptor is there: copies it, frees its slot, calls `run` on it,
  // then counts it done, also where `run` throws (the exception then goes on: the kernel
  // that waits for it goes on, and the failure is reported by the host). Returns whether it
  // found one. One thread calls.
  bool poll(const std::function<void(const DeviceNetOp&)>& run);
  // Tickets read so far.
  uint64_t next() const { return next_; }

 private:
  DeviceNetOp* slots_;
  uint64_t capacity_;
  uint64_t* freed_;
  uint64_t* done_;
  uint64_t next_ = 0;
};

// The ring's memory on GPU `device`: slots and the two counters in mapped host memory, the
// ticket counter, the flush mark and the bounce buffers' counters in device memory, the bounce
// buffers a VmmBuffer (the transport's copy context reaches it). Made on the calling thread
// (the application's context of the device). [heap_lo, heap_hi): this rank's heap window.
// `inline_max`: DeviceNetRing::inline_max (at most kDeviceNetInlineBytes).
class DeviceRing {
 public:
  static constexpr uint64_t kCapacity = 1024;
  DeviceRing(int device, const char* heap_lo, const char* heap_hi, uint64_t inline_max);
  ~DeviceRing();
  DeviceRing(const DeviceRing&) = delete;
  DeviceRing& operator=(const DeviceRing&) = delete;

  // For DeviceComm::net: the addresses as the GPU sees them.
  const DeviceNetRing& view() const { return view_; }
  RingReader& reader() { return *reader_; }

 private:
  struct Mapped {
    DeviceNetOp slots[kCapacity];
    uint64_t freed;
    uint64_t done;
  };
  int device_;
  Mapped* mapped_ = nullptr;           // host view
  // Device memory: tail, flushed, bounce_tail, bounce_gen[kDeviceNetBounceSlots].
  unsigned long long* counters_ = nullptr;
  std::unique_ptr<VmmBuffer> bounce_;  // kDeviceNetBounceSlots * kDeviceNetBounceBytes
  DeviceNetRing view_{};
  std::unique_ptr<RingReader> reader_;
};

}  // namespace symcomm
