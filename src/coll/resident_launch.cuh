// Collective kernels whose blocks wait for each other's peers (sm, ll) must have every block
// resident at once: how many blocks the GPU holds, and the launch that refuses a larger grid
// rather than leave it to hang. `kernel_of(T{})` names the kernel instance for element type
// T: uint8_t for data movement, the reduction's element type otherwise.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/launch.cuh"
#include "copy/reduce.h"

namespace symcomm {

// Blocks of `threads` threads of every instance of the kernel the current GPU holds at once.
template <typename KernelOf>
int resident_blocks(KernelOf kernel_of, int threads) {
  int device = 0, sms = 0, fewest = 1 << 30;
  SYMCOMM_CUDART(cudaGetDevice(&device));
  SYMCOMM_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto count = [&](auto zero) {
    int per_sm = 0;
    SYMCOMM_CUDART(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_of(zero),
                                                                 threads, 0));
    fewest = std::min(fewest, per_sm);
  };
  count(uint8_t{});
  for (symcommDataType_t t : {symcommInt8, symcommUint8, symcommInt32, symcommUint32, symcommInt64,
                              symcommUint64, symcommFloat16, symcommBfloat16, symcommFloat32,
                              symcommFloat64, symcommFloat8E4M3, symcommFloat8E5M2})
    with_type(t, count);
  return fewest * sms;
}

// kernel_of(T{})<<<blocks, threads, 0, stream>>>(plan) through launch_kernel (PDL), T as
// above; symcommNotSupported naming `what` (and `remedy`, "" for none) where blocks >
// resident.
template <typename KernelOf, typename Plan>
void launch_resident(KernelOf kernel_of, const Plan& plan, int blocks, int threads, int resident,
                     bool reduce, symcommDataType_t type, cudaStream_t stream, const char* what,
                     const char* remedy) {
  SYMCOMM_REQUIRE(blocks <= resident, symcommNotSupported,
                  "this %s collective needs %d blocks resident at once and the GPU holds %d%s%s",
                  what, blocks, resident, *remedy ? ": " : "", remedy);
  auto launch = [&](auto zero) { launch_kernel(kernel_of(zero), blocks, threads, stream, plan); };
  if (reduce)
    with_type(type, launch);
  else
    launch(uint8_t{});
  SYMCOMM_CUDART(cudaGetLastError());
}

}  // namespace symcomm
