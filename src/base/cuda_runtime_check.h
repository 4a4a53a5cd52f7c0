// Checking CUDA runtime calls: a failed call throws a symcomm error naming the call (out of
// memory as symcommOutOfMemory, anything else as symcommCudaError).
#pragma once

#include <cuda_runtime.h>

#include "base/error.h"

#define SYMCOMM_CUDART(call)                                                                \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess)                                                                  \
      SYMCOMM_THROW(e_ == cudaErrorMemoryAllocation ? symcommOutOfMemory : symcommCudaError, \
                    "%s failed: %s (%d)", #call, cudaGetErrorString(e_), static_cast<int>(e_)); \
  } while (0)
