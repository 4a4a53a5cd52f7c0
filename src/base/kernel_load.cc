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

// Every registered unit's library, each once.
std::vector<CUlibrary> libraries(const CudaDriver& drv) {
  std::vector<CUlibrary> out;
  for (const void* anchor : anchors()) {
    cudaKernel_t k = nullptr;
    SYMCOMM_CUDART(cudaGetKernel(&k, anchor));
    CUlibrary lib = nullptr;
    SYMCOMM_CU(drv, cuKernelGetLibrary(&lib, reinterpret_cast<CUkernel>(k)));
    if (std::find(out.begin(), out.end(), lib) == out.end()) out.push_back(lib);
  }
  return out;
}

std::vector<CUkernel> kernels_of(const CudaDriver& drv, CUlibrary lib) {
  unsigned count = 0;
  SYMCOMM_CU(drv, cuLibraryGetKernelCount(&count, lib));
  std::vector<CUkernel> kernels(count);
  SYMCOMM_CU(drv, cuLibraryEnumerateKernels(kernels.data(), count, lib));
  return kernels;
}
}  // namespace

KernelLibrary::KernelLibrary(const void* anchor) { anchors().push_back(anchor); }

void load_kernels(const CudaDriver& drv) {
  size_t n = 0;
  for (CUlibrary lib : libraries(drv))
    for (CUkernel k : kernels_of(drv, lib)) {
      CUfunction f = nullptr;
      SYMCOMM_CU(drv, cuKernelGetFunction(&f, k));  // the kernel in the current context
      SYMCOMM_CU(drv, cuFuncLoad(f));
      ++n;
    }
  SYMCOMM_DEBUG("loaded the library's %zu kernels", n);
}

// Observed without loading anything: cuKernelGetFunction would load the kernel (under lazy
// loading it does), so the loaded functions are those of the library's module in this context,
// where there is one yet.
KernelLoadState kernel_load_state(const CudaDriver& drv) {
  KernelLoadState s;
  for (CUlibrary lib : libraries(drv)) {
    ++s.libraries;
    const std::vector<CUkernel> kernels = kernels_of(drv, lib);
    s.kernels += static_cast<int>(kernels.size());
    CUmodule mod = nullptr;
    const CUresult r = drv.cuLibraryGetModule(&mod, lib);
    if (r == CUDA_ERROR_NOT_FOUND) {  // nothing of this library loaded here
      const char* name = "?";
      if (s.unloaded.empty() && !kernels.empty() &&
          drv.cuKernelGetName(&name, kernels[0]) == CUDA_SUCCESS)
        s.unloaded = name;
      continue;
    }
    if (r != CUDA_SUCCESS) throw_cuda_error(r, "cuLibraryGetModule", __FILE__, __LINE__);
    unsigned count = 0;
    SYMCOMM_CU(drv, cuModuleGetFunctionCount(&count, mod));
    std::vector<CUfunction> functions(count);
    SYMCOMM_CU(drv, cuModuleEnumerateFunctions(functions.data(), count, mod));
    for (CUfunction f : functions) {
      CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
      SYMCOMM_CU(drv, cuFuncIsLoaded(&state, f));
      if (state == CU_FUNCTION_LOADING_STATE_LOADED) {
        ++s.loaded;
      } else if (s.unloaded.empty()) {
        const char* name = "?";
        if (drv.cuFuncGetName(&name, f) != CUDA_SUCCESS) name = "?";
        s.unloaded = name;
      }
    }
  }
  return s;
}

}  // namespace symcomm
