// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") so that the same
// binaries start on machines without a driver (CI) and fall back to the host memory space
// with a clear message, instead of failing to load.
#pragma once

#include <cuda.h>  // types and prototypes only: symcomm never links -lcuda

#include <string>

#include "base/error.h"

// The driver entry points symcomm uses, looked up by their base names with
// cuGetProcAddress for the CUDA version symcomm was built with. That gives the newest
// version of each: a function whose newer version takes other arguments while the header
// keeps the old name without mapping it (cuStreamGetCtx, cuCtxSynchronize, cuCtxGetDevice)
// must be declared with the newer type (see cuStreamGetCtx_v2 below), not listed here.
#define SYMCOMM_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)          \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDeviceGetName)  \
  X(cuDeviceGetUuid) X(cuDeviceTotalMem) X(cuDeviceCanAccessPeer)                \
  X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxCreate) X(cuCtxDestroy)          \
  X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemRelease)                \
  X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)              \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap)           \
  X(cuMemSetAccess) X(cuMemGetAddressRange) X(cuMemsetD8) X(cuMemcpy)             \
  X(cuStreamWriteValue64) X(cuStreamWaitValue64) X(cuStreamWriteValue32)          \
  X(cuKernelGetLibrary) X(cuLibraryGetKernelCount) X(cuLibraryEnumerateKernels)  \
  X(cuKernelGetFunction) X(cuKernelGetName) X(cuFuncLoad) X(cuFuncIsLoaded)      \
  X(cuFuncGetName) X(cuLibraryGetModule) X(cuModuleGetFunctionCount)             \
  X(cuModuleEnumerateFunctions) X(cuModuleGetLoadingMode) X(cuStreamBatchMemOp)

namespace symcomm {

struct CudaDriver {
#define SYMCOMM_DECLARE_PFN(fn) decltype(&::fn) fn = nullptr;
  SYMCOMM_CUDA_DRIVER_FUNCTIONS(SYMCOMM_DECLARE_PFN)
#undef SYMCOMM_DECLARE_PFN
  // Looked up by the base name "cuStreamGetCtx", which for CUDA 12.5 and later gives this
  // version: three arguments (the header's cuStreamGetCtx takes two; calling the pointer as
  // that left the third, an output, as garbage: a crash).
  decltype(&::cuStreamGetCtx_v2) cuStreamGetCtx_v2 = nullptr;
  int version = 0;  // cuDriverGetVersion, e.g. 13000

  // The driver, loaded and initialised once; nullptr when there is none (see reason()).
  static const CudaDriver* get();
  // Why get() returned nullptr ("libcuda.so.1: cannot open shared object file ...").
  static std::string unavailable_reason();
};

// The driver or throws symcommNotSupported with the reason.
const CudaDriver& cuda_driver();

// Throws symcommCudaError (symcommOutOfMemory for CUDA_ERROR_OUT_OF_MEMORY) naming the call.
[[noreturn]] void throw_cuda_error(CUresult result, const char* call, const char* file, int line);

}  // namespace symcomm

namespace symcomm {
// `device`'s primary context, retained once for the process (the runtime keeps it too).
CUcontext primary_context(const CudaDriver& d, int device);
// The context `stream` (a CUstream) belongs to; null for the null or a special stream, or one
// the driver does not know (the caller's default, the primary context, serves).
CUcontext stream_context(const CudaDriver& d, void* stream);
}  // namespace symcomm

// Checks a driver call made through a CudaDriver `drv`: SYMCOMM_CU(drv, cuMemMap(...)).
#define SYMCOMM_CU(drv, call)                                                     \
  do {                                                                            \
    CUresult symcomm_cu_result_ = (drv).call;                                     \
    if (symcomm_cu_result_ != CUDA_SUCCESS)                                       \
      ::symcomm::throw_cuda_error(symcomm_cu_result_, #call, __FILE__, __LINE__); \
  } while (0)
