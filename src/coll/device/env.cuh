// What the collectives' device protocol (coll/device/ and each algorithm's *.cuh) is written
// against: CUDA's built-ins and symcomm's device API. Compiled by nvcc, those are the real
// ones (symcomm/device.cuh). Compiled by a host compiler, the including file has defined them
// first: tests/unit/emulation/harness.h runs every CUDA thread as a host thread and the
// memory operations as C++ atomics, so that the emulation tests run the library's own
// protocol code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include "base/launch.cuh"  // pdl_begin
#include "symcomm/device.cuh"
#elif !defined(SYMCOMM_EMULATION)
#error "device protocol code in a host file: include tests/unit/emulation/harness.h first"
#endif
