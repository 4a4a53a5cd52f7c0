// Device memory of the virtual memory management API (cuMemCreate, mapped read-write for its
// GPU): unlike cudaMalloc or cudaMallocAsync memory, which belong to the context that made
// them, every context of the device reaches it at the same address, the transport's copy
// context (net/copy_context.h) too. The transports' bounce buffers are made of it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace symcomm {

class VmmBuffer {
 public:
  // At least `bytes` (rounded up to the allocation granularity) on GPU `device`; throws.
  VmmBuffer(int device, size_t bytes);
  ~VmmBuffer();
  VmmBuffer(const VmmBuffer&) = delete;
  VmmBuffer& operator=(const VmmBuffer&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void release();
  char* data_ = nullptr;
  size_t bytes_ = 0;
  uint64_t handle_ = 0;  // a CUmemGenericAllocationHandle
  bool mapped_ = false;
};

}  // namespace symcomm
