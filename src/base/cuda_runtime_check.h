// Checking CUDA runtime calls: a failed call throws a symcomm error naming the call (out of
// memory as symcommOutOfMemory, anything else as symcommCudaError), and clears the runtime's
// last error, which symcomm's result reports instead: the caller's next cudaGetLastError
// (after a launch of its own) does not see it. And DeviceScope, which makes a communicator's device
// current for a call, ContextScope, which makes a given context current, and RelaxedCapture.
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

// Makes `context` (a CUcontext) current for the scope, then the caller's context (or none)
// again (a failure to restore is logged: destructors do not throw). A null context: the
// primary context of `device`.
class ContextScope {
 public:
  ContextScope(void* context, int device);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  void* previous_ = nullptr;  // the caller's CUcontext
  bool switched_ = false;
};

// Makes `device`'s primary context current for the scope. Contexts, not devices: on a thread
// that never chose a device, the runtime says device 0, and setting device 0 back would
// create GPU 0's primary context in every process that calls from such a thread; the
// runtime's own choice of device is left untouched.
class DeviceScope : public ContextScope {
 public:
  explicit DeviceScope(int device) : ContextScope(nullptr, device) {}
};

// This thread in relaxed stream-capture mode for the scope: a query or an allocation made
// while the caller captures a graph is this thread's own business, not the capture's, and
// must not be taken for an unsafe call, which would end the capture.
class RelaxedCapture {
 public:
  RelaxedCapture() { set_ = cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess; }
  ~RelaxedCapture() {
    if (set_) static_cast<void>(cudaThreadExchangeStreamCaptureMode(&mode_));  // the caller's
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool set_ = false;
};

}  // namespace symcomm
