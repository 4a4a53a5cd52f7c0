#include "base/kernel_load.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/log.h"

namespace symcomm {

namespace {
std::vector<const void*>& anchors() {
  static std::vector<const void*> a;  // filled by static initialisers, read after main starts
  return a;
}

// Every kernel of every registered unit's library (each library once; `libraries` counts
// them).
std::vector<CUkernel> all_kernels(const CudaDriver& drv, int* libraries_out = nullptr) {
  std::vector<CUlibrary> libraries;
  std::vector<CUkernel> kernels;
  for (const void* anchor : anchors()) {
    cudaKernel_t k = nullptr;
    SYMCOMM_CUDART(cudaGetKernel(&k, anchor));
    CUlibrary lib = nullptr;
    SYMCOMM_CU(drv, cuKernelGetLibrary(&lib, reinterpret_cast<CUkernel>(k)));
    if (std::find(libraries.begin(), libraries.end(), lib) != libraries.end()) continue;
    libraries.push_back(lib);
    unsigned count = 0;
    SYMCOMM_CU(drv, cuLibraryGetKernelCount(&count, lib));
    const size_t at = kernels.size();
    kernels.resize(at + count);
    SYMCOMM_CU(drv, cuLibraryEnumerateKernels(kernels.data() + at, count, lib));
  }
  if (libraries_out) *libraries_out = static_cast<int>(libraries.size());
  return kernels;
}
}  // namespace

KernelLibrary::KernelLibrary(const void* anchor) { anchors().push_back(anchor); }

void load_kernels(const CudaDriver& drv) {
  const std::vector<CUkernel> kernels = all_kernels(drv);
  for (CUkernel k : kernels) {
    CUfunction f = nullptr;
    SYMCOMM_CU(drv, cuKernelGetFunction(&f, k));
    SYMCOMM_CU(drv, cuFuncLoad(f));
  }
  SYMCOMM_DEBUG("loaded the library's %zu kernels", kernels.size());
}

KernelLoadState kernel_load_state(const CudaDriver& drv) {
  KernelLoadState s;
  for (CUkernel k : all_kernels(drv, &s.libraries)) {
    ++s.kernels;
    CUfunction f = nullptr;
    SYMCOMM_CU(drv, cuKernelGetFunction(&f, k));
    CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
    SYMCOMM_CU(drv, cuFuncIsLoaded(&state, f));
    if (state == CU_FUNCTION_LOADING_STATE_LOADED) {
      ++s.loaded;
    } else if (s.unloaded.empty()) {
      const char* name = "?";
      if (drv.cuKernelGetName(&name, k) != CUDA_SUCCESS) name = "?";
      s.unloaded = name;
    }
  }
  return s;
}

}  // namespace symcomm
