// The library's kernels are loaded into a GPU's context when a communicator is made there,
// not at their first launch.
//
// By default CUDA loads a kernel when it is first launched (CUDA_MODULE_LOADING=LAZY), and
// loading may wait for every kernel running on the GPU (CUDA C++ Programming Guide, "Lazy
// Loading": "loading kernels might require context synchronization"). A first launch beside
// another communicator's kernel that waits for its peers then waits for that kernel, while
// the peers may wait, in their own first launches, for kernels this rank has not launched
// yet: on 4 x H200 every wait of two of the three communicators of
// Threads.CommunicatorsUsedAtOnceFromThreads ran to SYMCOMM_WAIT_TIMEOUT in the first run on
// a fresh machine. NCCL loads its kernels when a communicator is made too.
//
// Each translation unit that defines kernels registers one of them with a static
// KernelLibrary; the CUDA library that holds it (all the unit's kernels, every template
// instance) is loaded whole. unit_kernels_registered (CI) checks that every .cu file of src/
// registers; gpu_kernel_load that making a communicator loads them all.
#pragma once

#include <string>

namespace symcomm {

struct CudaDriver;

// Registers the kernels of the translation unit that defines `anchor` (any one of them).
struct KernelLibrary {
  explicit KernelLibrary(const void* anchor);
};

// Loads every registered unit's kernels into the current context (cheap when they are).
void load_kernels(const CudaDriver& drv);

// The registered units' kernels and how many of them the current context has loaded, with
// the name of one that it has not (tests).
struct KernelLoadState {
  int libraries = 0, kernels = 0, loaded = 0;
  std::string unloaded;  // a kernel not loaded, "" if none
};
KernelLoadState kernel_load_state(const CudaDriver& drv);

}  // namespace symcomm
