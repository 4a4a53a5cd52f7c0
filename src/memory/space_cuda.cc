// The cuda memory space: physical chunks from cuMemCreate on this rank's GPU, exported as
// POSIX file descriptors (or fabric handles, for multi-node NVLink) and mapped by the local
// peers into one reserved virtual-address window per peer, with access for their GPU.
#include <cuda_runtime.h>

#include <cstring>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "base/param.h"
#include "memory/space.h"

namespace symcomm {

static const EnumParam kHandleType(
    "SYMCOMM_CUMEM_HANDLE", "fd", "fd|fabric",
    "how heap chunks are shared: POSIX file descriptors, or fabric handles (multi-node NVLink, "
    "needs IMEX)");

namespace {

// For clean-up paths that must not throw: the failure is logged, not lost.
void warn_if_failed(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) SYMCOMM_WARN("%s failed with CUDA error %d", what, static_cast<int>(r));
}

// The allocations a space last found accessible to its GPU, on this thread: two, so that a
// collective's send and recv, asked about at every call, both stay known.
struct AccessibleRange {
  const void* space = nullptr;
  int device = -1;
  uintptr_t lo = 0, hi = 0;
};
thread_local AccessibleRange t_accessible[2];
thread_local unsigned t_accessible_next = 0;  // the entry a new range replaces

class CudaSpace final : public Space {
 public:
  explicit CudaSpace(int device) : drv_(cuda_driver()), device_(device) {
    SYMCOMM_CU(drv_, cuDeviceGet(&dev_, device));
    int vmm = 0, fd_ok = 0, fabric_ok = 0;
    SYMCOMM_CU(drv_, cuDeviceGetAttribute(
                         &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_));
    SYMCOMM_CU(drv_, cuDeviceGetAttribute(
                         &fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                         dev_));
    SYMCOMM_CU(drv_, cuDeviceGetAttribute(
                         &fabric_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev_));
    SYMCOMM_REQUIRE(vmm, symcommNotSupported,
                    "device %d does not support virtual memory management (cuMemCreate)", device);
    fabric_ = kHandleType.get() == "fabric";
    SYMCOMM_REQUIRE(fabric_ ? fabric_ok : fd_ok, symcommNotSupported,
                    "device %d does not support %s handles (SYMCOMM_CUMEM_HANDLE)", device,
                    fabric_ ? "fabric" : "POSIX file descriptor");
    SYMCOMM_CU(drv_, cuDevicePrimaryCtxRetain(&ctx_, dev_));
    SYMCOMM_CU(drv_, cuCtxSetCurrent(ctx_));
    CUmemAllocationProp prop = properties();
    SYMCOMM_CU(drv_, cuMemGetAllocationGranularity(&granularity_, &prop,
                                                   CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    SYMCOMM_CU(drv_, cuDeviceTotalMem(&total_, dev_));
  }
  ~CudaSpace() override {
    warn_if_failed(drv_.cuDevicePrimaryCtxRelease(dev_), "cuDevicePrimaryCtxRelease");
  }

  symcommMemorySpace_t kind() const override { return symcommSpaceCuda; }
  const char* name() const override { return "cuda"; }
  size_t granularity() const override { return granularity_; }
  size_t default_max_bytes() const override { return total_ / granularity_ * granularity_; }
  size_t default_chunk_bytes() const override { return size_t{512} << 20; }
  bool handles_are_bytes() const override { return fabric_; }

  void* reserve(size_t bytes) override {
    CUdeviceptr p = 0;
    SYMCOMM_CU(drv_, cuMemAddressReserve(&p, bytes, granularity_, 0, 0));
    return reinterpret_cast<void*>(p);
  }
  void unreserve(void* base, size_t bytes) override {
    warn_if_failed(drv_.cuMemAddressFree(reinterpret_cast<CUdeviceptr>(base), bytes),
                   "cuMemAddressFree");
  }

  uint64_t create(size_t bytes) override {
    CUmemAllocationProp prop = properties();
    CUmemGenericAllocationHandle h;
    CUresult r = drv_.cuMemCreate(&h, bytes, &prop, 0);
    if (r == CUDA_ERROR_NOT_PERMITTED && fabric_)
      SYMCOMM_THROW(symcommNotSupported,
                    "cuMemCreate refused fabric-shareable memory (CUDA_ERROR_NOT_PERMITTED): "
                    "fabric handles need an IMEX channel (/dev/nvidia-caps-imex-channels); on "
                    "a single node use SYMCOMM_CUMEM_HANDLE=fd");
    if (r != CUDA_SUCCESS) throw_cuda_error(r, "cuMemCreate", __FILE__, __LINE__);
    return h;
  }
  void destroy(uint64_t handle) override {
    warn_if_failed(drv_.cuMemRelease(handle), "cuMemRelease");
  }

  void map(void* addr, size_t bytes, uint64_t handle) override {
    auto p = reinterpret_cast<CUdeviceptr>(addr);
    SYMCOMM_CU(drv_, cuMemMap(p, bytes, 0, handle, 0));
    grant_access(p, bytes);
  }

  SharedHandle share(uint64_t handle) override {
    SharedHandle out;
    if (fabric_) {
      CUmemFabricHandle f;
      SYMCOMM_CU(drv_, cuMemExportToShareableHandle(&f, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0));
      static_assert(sizeof f <= sizeof out.bytes);
      std::memcpy(out.bytes.data(), &f, sizeof f);
    } else {
      int fd = -1;
      SYMCOMM_CU(drv_, cuMemExportToShareableHandle(
                           &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      out.fd.reset(fd);
    }
    return out;
  }

  void map_peer(void* addr, size_t bytes, const SharedHandle& shared) override {
    CUmemGenericAllocationHandle h;
    if (fabric_) {
      CUmemFabricHandle f;
      std::memcpy(&f, shared.bytes.data(), sizeof f);
      SYMCOMM_CU(drv_, cuMemImportFromShareableHandle(&h, &f, CU_MEM_HANDLE_TYPE_FABRIC));
    } else {
      void* os_handle = reinterpret_cast<void*>(static_cast<uintptr_t>(shared.fd.get()));
      SYMCOMM_CU(drv_, cuMemImportFromShareableHandle(
                           &h, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    }
    auto p = reinterpret_cast<CUdeviceptr>(addr);
    CUresult r = drv_.cuMemMap(p, bytes, 0, h, 0);
    // The mapping holds its own reference to the physical memory.
    warn_if_failed(drv_.cuMemRelease(h), "cuMemRelease(imported chunk)");
    if (r != CUDA_SUCCESS) throw_cuda_error(r, "cuMemMap(peer chunk)", __FILE__, __LINE__);
    try {
      grant_access(p, bytes);
    } catch (...) {
      warn_if_failed(drv_.cuMemUnmap(p, bytes), "cuMemUnmap");
      throw;
    }
  }

  void unmap(void* addr, size_t bytes) override {
    SYMCOMM_CU(drv_, cuMemUnmap(reinterpret_cast<CUdeviceptr>(addr), bytes));
  }

  // Registered buffers travel as CUDA IPC handles: the allocation must come from cudaMalloc
  // (cuMemCreate memory and stream-ordered pools have no IPC handle of that kind).
  SharedHandle share_buffer(const void* ptr, size_t bytes, size_t* offset) override {
    DeviceScope guard(device_);
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) (void)cudaGetLastError();
    SYMCOMM_REQUIRE(attr.type == cudaMemoryTypeDevice && attr.device == device_,
                    symcommInvalidArgument,
                    "%p is not memory of this rank's GPU %d (cudaPointerGetAttributes: type %d, "
                    "device %d): only device memory can be registered",
                    ptr, device_, static_cast<int>(attr.type), attr.device);
    CUdeviceptr base = 0;
    size_t size = 0;
    SYMCOMM_CU(drv_, cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(ptr)));
    const auto at = reinterpret_cast<CUdeviceptr>(ptr);
    SYMCOMM_REQUIRE(bytes <= size - (at - base), symcommInvalidArgument,  // at is in the range
                    "[%p, +%zu) runs past the end of its allocation (%zu bytes from %p)", ptr,
                    bytes, size, reinterpret_cast<void*>(base));
    cudaIpcMemHandle_t h;
    if (cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)); e != cudaSuccess) {
      (void)cudaGetLastError();
      SYMCOMM_THROW(symcommNotSupported,
                    "the allocation holding %p cannot be shared (cudaIpcGetMemHandle: %s): only "
                    "cudaMalloc memory can be registered, not cuMemCreate or cudaMallocAsync "
                    "memory; use symcommMalloc for such buffers",
                    ptr, cudaGetErrorString(e));
    }
    SharedHandle out;
    static_assert(sizeof h <= sizeof out.bytes);
    std::memcpy(out.bytes.data(), &h, sizeof h);
    *offset = static_cast<size_t>(at - base);
    return out;
  }

  char* open_buffer(const SharedHandle& shared) override {
    DeviceScope guard(device_);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, shared.bytes.data(), sizeof h);
    void* p = nullptr;
    SYMCOMM_CUDART(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    return static_cast<char*>(p);
  }

  void synchronize() override {
    DeviceScope guard(device_);
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  }

  // Device memory of this GPU (cudaMalloc, cuMemCreate, pools), managed memory, and pinned
  // host memory that the GPU reaches at the same address. Pageable memory is refused even
  // where the GPU could reach it (HMM, ATS): copy engines would stage it through the host,
  // and whether kernels may touch it depends on the system, not on the program.
  //
  // The last device or managed allocation found accessible is remembered per thread: puts
  // and gets from a plain buffer ask about it on every call, and the driver's answer (with
  // the capture-mode switch around it) costs far more than a range check.
  std::string device_access_problem(const void* ptr) const override {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    for (const AccessibleRange& r : t_accessible)
      if (r.space == this && r.device == device_ && p >= r.lo && p < r.hi) return "";
    cudaPointerAttributes attr{};
    bool accessible = false;
    {
      // The device first: on a thread that chose none, a runtime call outside the scope
      // would make GPU 0's context (and leave it current).
      DeviceScope guard(device_);
      RelaxedCapture relaxed;  // the caller may be capturing a graph
      if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) (void)cudaGetLastError();
      accessible = attr.type == cudaMemoryTypeManaged ||
                   (attr.type == cudaMemoryTypeDevice && attr.device == device_);
      CUdeviceptr base = 0;
      size_t size = 0;
      if (accessible &&
          drv_.cuMemGetAddressRange(&base, &size, static_cast<CUdeviceptr>(p)) == CUDA_SUCCESS)
        t_accessible[t_accessible_next++ % 2] = AccessibleRange{this, device_, base, base + size};
    }
    if (accessible) return "";
    if (attr.type == cudaMemoryTypeHost && attr.devicePointer == ptr) return "";
    return format("%p is %s, which this rank's GPU %d does not access at that address: pass "
                  "memory of this GPU (symcommMalloc, cudaMalloc), managed memory, or pinned "
                  "host memory (cudaMallocHost, cudaHostRegister)",
                  ptr,
                  attr.type == cudaMemoryTypeDevice ? "memory of another GPU"
                  : attr.type == cudaMemoryTypeHost ? "pinned host memory not mapped for it"
                                                    : "pageable host memory",
                  device_);
  }

  void close_buffer(char* base) override {
    DeviceScope guard(device_);
    if (cudaError_t e = cudaIpcCloseMemHandle(base); e != cudaSuccess)
      SYMCOMM_WARN("cudaIpcCloseMemHandle(%p) failed: %s", static_cast<void*>(base),
                   cudaGetErrorString(e));
  }

 private:
  CUmemAllocationProp properties() const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device_;
    prop.requestedHandleTypes =
        fabric_ ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
  }
  void grant_access(CUdeviceptr p, size_t bytes) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    SYMCOMM_CU(drv_, cuMemSetAccess(p, bytes, &access, 1));
  }

  const CudaDriver& drv_;
  int device_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  size_t granularity_ = 0;
  size_t total_ = 0;
  bool fabric_ = false;
};

}  // namespace

std::unique_ptr<Space> make_cuda_space(int device) { return std::make_unique<CudaSpace>(device); }

}  // namespace symcomm
