#include "transport/vmm_buffer.h"

#include "base/cuda_driver.h"
#include "base/error.h"
#include "base/log.h"

namespace symcomm {

VmmBuffer::VmmBuffer(int device, size_t bytes) {
  const CudaDriver& drv = cuda_driver();
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  SYMCOMM_CU(drv, cuMemGetAllocationGranularity(&granularity, &prop,
                                                CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  bytes_ = (bytes + granularity - 1) / granularity * granularity;
  try {
    CUmemGenericAllocationHandle h = 0;
    SYMCOMM_CU(drv, cuMemCreate(&h, bytes_, &prop, 0));
    handle_ = h;
    CUdeviceptr p = 0;
    SYMCOMM_CU(drv, cuMemAddressReserve(&p, bytes_, granularity, 0, 0));
    data_ = reinterpret_cast<char*>(p);
    SYMCOMM_CU(drv, cuMemMap(p, bytes_, 0, h, 0));
    mapped_ = true;
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    SYMCOMM_CU(drv, cuMemSetAccess(p, bytes_, &access, 1));
  } catch (...) {
    release();
    throw;
  }
}

VmmBuffer::~VmmBuffer() { release(); }

void VmmBuffer::release() {
  const CudaDriver* drv = CudaDriver::get();
  if (!drv) return;
  const auto p = reinterpret_cast<CUdeviceptr>(data_);
  if (mapped_ && drv->cuMemUnmap(p, bytes_) != CUDA_SUCCESS)
    SYMCOMM_WARN("a bounce buffer: cuMemUnmap failed");
  if (data_ && drv->cuMemAddressFree(p, bytes_) != CUDA_SUCCESS)
    SYMCOMM_WARN("a bounce buffer: cuMemAddressFree failed");
  if (handle_ && drv->cuMemRelease(handle_) != CUDA_SUCCESS)
    SYMCOMM_WARN("a bounce buffer: cuMemRelease failed");
  data_ = nullptr;
  handle_ = 0;
  mapped_ = false;
}

}  // namespace symcomm
