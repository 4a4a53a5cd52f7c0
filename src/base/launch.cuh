// How the library launches its kernels: with programmatic dependent launch (PDL, sm_90 and
// later) where SYMCOMM_PDL allows it.
//
// A kernel launched with PDL may start while the kernel before it on the stream is still
// running; it must not touch memory before `griddepcontrol.wait`, which returns once that
// kernel has completed and its writes are visible. Every library kernel therefore begins
// with pdl_begin(): the wait, then `griddepcontrol.launch_dependents`, which lets the next
// PDL launch on the stream start in turn (its blocks take the SM space this kernel leaves
// free and wait there). What is saved is the launch latency between two dependent kernels:
// the next kernel's blocks are resident when this one ends. Nothing else changes: a kernel
// still begins its work after everything before it on the stream.
//
// Kernels that wait for their peers' blocks (collectives, barriers) stay safe: a kernel is
// launched only when every block of the one before it has run pdl_begin, so that kernel's
// blocks are all resident already, and the new kernel's blocks wait in hardware, holding
// no peer, until it ends. A user kernel launched after ours with PDL must wait too
// (cudaGridDependencySynchronize), as CUDA requires of any PDL launch; one launched without
// it starts after our kernel ends, as always.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "base/cuda_runtime_check.h"

namespace symcomm {

__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// SYMCOMM_PDL (base/launch.cc).
bool pdl_enabled();

// kernel<<<grid, block, 0, stream>>>(args...), with the PDL attribute where enabled.
template <typename... Expected, typename... Actual>
void launch_kernel(void (*kernel)(Expected...), dim3 grid, dim3 block, cudaStream_t stream,
                   Actual&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  SYMCOMM_CUDART(cudaLaunchKernelEx(&config, kernel, std::forward<Actual>(args)...));
}

}  // namespace symcomm
