#include "transport/net/copy_context.h"

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"

namespace symcomm {

CopyContext::CopyContext(int device) : device_(device) {
  const CudaDriver& drv = cuda_driver();
  CUdevice dev = 0;
  SYMCOMM_CU(drv, cuDeviceGet(&dev, device));
  CUcontext previous = nullptr;
  SYMCOMM_CU(drv, cuCtxGetCurrent(&previous));
  CUcontext made = nullptr;
  SYMCOMM_CU(drv, cuCtxCreate(&made, nullptr, 0, dev));  // current now
  context_ = made;
  try {
    load_kernels(drv);  // the signal kernel runs here too (base/kernel_load.h)
  } catch (...) {
    drv.cuCtxSetCurrent(previous);
    drv.cuCtxDestroy(made);
    throw;
  }
  SYMCOMM_CU(drv, cuCtxSetCurrent(previous));
}

CopyContext::~CopyContext() {
  const CudaDriver* drv = CudaDriver::get();
  if (drv && context_) {
    if (CUresult r = drv->cuCtxDestroy(static_cast<CUcontext>(context_)); r != CUDA_SUCCESS)
      SYMCOMM_WARN("destroying the net transport's CUDA context failed with CUDA error %d",
                   static_cast<int>(r));
  }
}

}  // namespace symcomm
