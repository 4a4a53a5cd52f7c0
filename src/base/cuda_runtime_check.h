// Checking CUDA runtime calls: a failed call throws a symcomm error naming the call (out of
// memory as symcommOutOfMemory, anything else as symcommCudaError), and clears the runtime's
// last error, which symcomm's result now reports: the caller's next cudaGetLastError (after
// a launch of its own) does not see it. And DeviceScope, which makes a communicator's device
// current for a call.
#pragma once

#include <cuda_runtime.h>

#include "base/error.h"
#include "base/log.h"

#define SYMCOMM_CUDART(call)                                                                \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      static_cast<void>(cudaGetLastError()); /* reported by the throw, not to the caller */   \
      SYMCOMM_THROW(e_ == cudaErrorMemoryAllocation ? symcommOutOfMemory : symcommCudaError, \
                    "%s failed: %s (%d)", #call, cudaGetErrorString(e_), static_cast<int>(e_)); \
    }                                                                                       \
  } while (0)

namespace symcomm {

// Makes `device` current for the scope and restores the caller's device after it (a failure
// to restore is logged: destructors do not throw).
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    SYMCOMM_CUDART(cudaGetDevice(&previous_));
    if (previous_ != device_) SYMCOMM_CUDART(cudaSetDevice(device_));
  }
  ~DeviceScope() {
    if (previous_ == device_) return;
    if (cudaError_t e = cudaSetDevice(previous_); e != cudaSuccess)
      SYMCOMM_WARN("cudaSetDevice(%d) failed: %s", previous_, cudaGetErrorString(e));
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int device_;
  int previous_ = -1;
};

}  // namespace symcomm
