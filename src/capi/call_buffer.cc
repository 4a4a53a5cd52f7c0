#include "capi/call_buffer.h"

#include <cuda_runtime.h>

#include "base/cuda_runtime_check.h"
#include "base/log.h"

namespace symcomm::capi {

CallBuffer::~CallBuffer() {
  if (!device_) return;
  try {
    DeviceScope guard(c_.topology.device);
    if (cudaFreeAsync(device_, static_cast<cudaStream_t>(stream_)) != cudaSuccess)
      SYMCOMM_WARN("freeing %s: %s", what_, cudaGetErrorString(cudaGetLastError()));
  } catch (const std::exception& e) {
    SYMCOMM_WARN("freeing %s: %s", what_, e.what());
  }
}

char* CallBuffer::get(size_t bytes) {
  if (c_.space_kind == symcommSpaceCuda) {
    if (!device_) {
      DeviceScope guard(c_.topology.device);
      SYMCOMM_CUDART(cudaMallocAsync(&device_, bytes, static_cast<cudaStream_t>(stream_)));
    }
    return static_cast<char*>(device_);
  }
  if (!host_) host_ = std::make_unique<uint64_t[]>(bytes / sizeof(uint64_t) + 1);
  return reinterpret_cast<char*>(host_.get());
}

}  // namespace symcomm::capi
