#include "base/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "base/cuda_runtime_check.h"
#include "base/log.h"

namespace symcomm {

namespace {
struct Loaded {
  CudaDriver driver;
  bool ok = false;
  std::string reason;
};

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.reason = format("no CUDA driver: %s", e ? e : "dlopen(libcuda.so.1) failed");
    return l;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    l.reason = "the CUDA driver is too old (no cuGetProcAddress_v2); symcomm needs CUDA 12+";
    return l;
  }
  CudaDriver& d = l.driver;
#define SYMCOMM_LOAD_PFN(fn)                                                           \
  {                                                                                    \
    CUdriverProcAddressQueryResult status;                                             \
    void* p = nullptr;                                                                 \
    if (get_proc(#fn, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=       \
            CUDA_SUCCESS ||                                                            \
        !p) {                                                                          \
      l.reason = format("the CUDA driver lacks %s for CUDA %d", #fn, CUDA_VERSION);   \
      return l;                                                                        \
    }                                                                                  \
    d.fn = reinterpret_cast<decltype(d.fn)>(p);                                        \
  }
  SYMCOMM_CUDA_DRIVER_FUNCTIONS(SYMCOMM_LOAD_PFN)
#undef SYMCOMM_LOAD_PFN
  static_assert(CUDA_VERSION >= 12050, "cuStreamGetCtx_v2 is CUDA 12.5's");
  {
    CUdriverProcAddressQueryResult status;
    void* p = nullptr;
    if (get_proc("cuStreamGetCtx", &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
            CUDA_SUCCESS || !p) {
      l.reason = format("the CUDA driver lacks cuStreamGetCtx for CUDA %d", CUDA_VERSION);
      return l;
    }
    d.cuStreamGetCtx_v2 = reinterpret_cast<decltype(d.cuStreamGetCtx_v2)>(p);
  }
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = "?";
    d.cuGetErrorName(r, &name);
    l.reason = format("cuInit failed: %s (%d)", name, static_cast<int>(r));
    return l;
  }
  d.cuDriverGetVersion(&d.version);
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}
}  // namespace

const CudaDriver* CudaDriver::get() {
  const Loaded& l = loaded();
  return l.ok ? &l.driver : nullptr;
}

std::string CudaDriver::unavailable_reason() { return loaded().reason; }

const CudaDriver& cuda_driver() {
  const CudaDriver* d = CudaDriver::get();
  if (!d) SYMCOMM_THROW(symcommNotSupported, "%s", CudaDriver::unavailable_reason().c_str());
  return *d;
}

void throw_cuda_error(CUresult result, const char* call, const char* file, int line) {
  const char* name = "?";
  const char* text = "?";
  if (const CudaDriver* d = CudaDriver::get()) {
    // Both leave NULL for a code they do not know.
    if (d->cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) name = "?";
    if (d->cuGetErrorString(result, &text) != CUDA_SUCCESS || !text) text = "?";
  }
  symcommResult_t code =
      result == CUDA_ERROR_OUT_OF_MEMORY ? symcommOutOfMemory : symcommCudaError;
  throw_error(code, file, line,
              format("%s failed: %s (%d): %s", call, name, static_cast<int>(result), text));
}

CUcontext primary_context(const CudaDriver& d, int device) {
  constexpr int kMaxDevices = 256;
  static std::atomic<CUcontext> contexts[kMaxDevices];
  static std::mutex mutex;
  SYMCOMM_REQUIRE(device >= 0 && device < kMaxDevices, symcommInvalidArgument,
                  "device %d is out of range", device);
  if (CUcontext c = contexts[device].load(std::memory_order_acquire)) return c;
  std::lock_guard<std::mutex> lock(mutex);
  if (CUcontext c = contexts[device].load(std::memory_order_acquire)) return c;
  CUdevice dev = 0;
  SYMCOMM_CU(d, cuDeviceGet(&dev, device));
  CUcontext c = nullptr;
  SYMCOMM_CU(d, cuDevicePrimaryCtxRetain(&c, dev));
  contexts[device].store(c, std::memory_order_release);
  return c;
}

CUcontext stream_context(const CudaDriver& d, void* stream) {
  if (reinterpret_cast<uintptr_t>(stream) <= 2) return nullptr;  // null, legacy, per-thread
  CUcontext context = nullptr;
  CUgreenCtx green = nullptr;
  if (d.cuStreamGetCtx_v2(static_cast<CUstream>(stream), &context, &green) != CUDA_SUCCESS)
    return nullptr;
  return context;
}

ContextScope::ContextScope(void* context, int device) {
  const CudaDriver& d = cuda_driver();
  CUcontext current = nullptr;
  SYMCOMM_CU(d, cuCtxGetCurrent(&current));
  const CUcontext wanted = context ? static_cast<CUcontext>(context) : primary_context(d, device);
  if (current == wanted) return;
  SYMCOMM_CU(d, cuCtxSetCurrent(wanted));
  previous_ = current;
  switched_ = true;
}

ContextScope::~ContextScope() {
  if (!switched_) return;
  const CudaDriver& d = *CudaDriver::get();
  if (CUresult r = d.cuCtxSetCurrent(static_cast<CUcontext>(previous_)); r != CUDA_SUCCESS)
    SYMCOMM_WARN("restoring the caller's CUDA context failed with CUDA error %d",
                 static_cast<int>(r));
}

}  // namespace symcomm
