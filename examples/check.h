// Error checks of the examples: print what failed and exit (examples, unlike the library,
// may exit).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "symcomm/symcomm.h"

#define CHECK_SC(call)                                                                    \
  do {                                                                                    \
    if ((call) != symcommSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s\n", #call, symcommGetLastError());              \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));             \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
