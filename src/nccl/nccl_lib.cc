#include "nccl/nccl_lib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "base/log.h"
#include "base/param.h"

namespace symcomm {

#ifdef SYMCOMM_HAVE_NCCL

static const StringParam kLibrary(
    "SYMCOMM_NCCL_LIBRARY", "libnccl.so.2",
    "the NCCL library that the nccl collective algorithm and decomposition backend load "
    "(a name for dlopen or a path)");
static const StringParam kNvls(
    "NCCL_NVLS_ENABLE", "",
    "NCCL: NVLink multicast. symcomm sets it to 0 before loading NCCL, whatever it was "
    "(multicast is forbidden on the shared machines)");

static const StringParam kGraphRegister(
    "NCCL_GRAPH_REGISTER", "",
    "NCCL: registration of user buffers in CUDA graph captures. symcomm sets it to 0 before "
    "loading NCCL, whatever it was (symcomm's NCCL calls mix symmetric-heap and other buffers, "
    "which registration does not allow)");

namespace {

// Sets NCCL variable `var` to 0 in the environment, overriding (with a warning saying `why`)
// any other value the caller set. NCCL reads its variables once, on first use (and
// ~/.nccl.conf may set them then if the environment does not): they must be 0 before the
// first NCCL call.
// Where it is 0 already the environment is left alone: setenv may move the environment while
// another thread reads it (getenv), which glibc before 2.40 does not make safe.
void force_off(const StringParam& var, const char* why) {
  const std::optional<std::string> v = var.raw();
  if (v && *v == "0") return;
  if (v) SYMCOMM_WARN("%s=%s is set: overriding it with 0 (%s)", var.name(), v->c_str(), why);
  SYMCOMM_SYSCHECK(setenv(var.name(), "0", 1));
}

// NCCL_NVLS_ENABLE: symcomm never lets NCCL use NVLink multicast.
//
// NCCL_GRAPH_REGISTER: in a CUDA graph capture NCCL registers every buffer that cuMem memory
// holds (symmetric heaps are) for zero-copy transfers, and requires that the send and receive
// buffers of a call be registered on every member or on none: a mix is undefined. symcomm
// hands NCCL both kinds in one call (a plain send buffer and a symmetric receive buffer, or
// members whose buffers differ), and the mix loses data: an all-to-all of 2 MiB blocks from
// cudaMalloc memory into a symmetric buffer, captured and replayed, received nothing from its
// peers (NCCL 2.28.3 on 2 x H200, tests/mp/coll_mix_test.cc). NCCL reads it on its first
// captured call.
void keep_nccl_safe() {
  force_off(kNvls, "NVLink multicast is forbidden on the shared machines");
  force_off(kGraphRegister,
            "symcomm's NCCL calls mix registered and unregistered buffers, which NCCL does not "
            "allow");
}

}  // namespace

void keep_nccl_safe_once() {
  static std::once_flag once;
  std::call_once(once, keep_nccl_safe);
}

NcclLoad load_nccl(const char* path) {
  NcclLoad l;
  keep_nccl_safe();
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    l.reason = format("NCCL cannot be loaded (SYMCOMM_NCCL_LIBRARY=%s): %s", path,
                      e ? e : "dlopen failed");
    return l;
  }
  NcclLib& lib = l.lib;
#define SYMCOMM_LOAD_NCCL_PFN(fn)                                                  \
  {                                                                                \
    void* p = dlsym(handle, #fn);                                                  \
    if (!p) {                                                                      \
      l.reason = format("%s lacks %s: symcomm needs NCCL 2.7 or later", path, #fn); \
      dlclose(handle);                                                             \
      return l;                                                                    \
    }                                                                              \
    lib.fn = reinterpret_cast<decltype(lib.fn)>(p);                                \
  }
  SYMCOMM_NCCL_FUNCTIONS(SYMCOMM_LOAD_NCCL_PFN)
#undef SYMCOMM_LOAD_NCCL_PFN
  lib.ncclGetLastError =
      reinterpret_cast<decltype(lib.ncclGetLastError)>(dlsym(handle, "ncclGetLastError"));
  ncclResult_t r = lib.ncclGetVersion(&lib.version);
  if (r != ncclSuccess) {
    l.reason = format("%s: ncclGetVersion failed: %s (%d)", path, lib.ncclGetErrorString(r),
                      static_cast<int>(r));
    dlclose(handle);
    return l;
  }
  l.ok = true;
  return l;
}

namespace {
const NcclLoad& loaded() {
  static const NcclLoad l = [] {
    const std::string path = kLibrary.get();
    NcclLoad r = load_nccl(path.c_str());
    if (r.ok)
      SYMCOMM_INFO("NCCL %s loaded from %s", nccl_version_string(r.lib.version).c_str(),
                   path.c_str());
    return r;
  }();
  return l;
}
}  // namespace

const NcclLib* NcclLib::get() { return loaded().ok ? &loaded().lib : nullptr; }

std::string nccl_unavailable_reason() { return loaded().reason; }

const NcclLib& nccl_lib() {
  const NcclLib* lib = NcclLib::get();
  if (!lib) SYMCOMM_THROW(symcommNotSupported, "%s", nccl_unavailable_reason().c_str());
  return *lib;
}

std::string nccl_version_string(int v) {
  // NCCL_VERSION: 2.8.x and before are X * 1000 + Y * 100 + Z, later X * 10000 + Y * 100 + Z.
  if (v >= 10000) return format("%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  return format("%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}

symcommResult_t nccl_result_code(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return symcommSuccess;
    case ncclUnhandledCudaError: return symcommCudaError;
    case ncclSystemError: return symcommSystemError;
    case ncclInvalidArgument: return symcommInvalidArgument;
    case ncclInvalidUsage: return symcommInvalidUsage;
    case ncclRemoteError: return symcommRemoteError;
    default: return symcommInternalError;  // ncclInternalError; ncclInProgress (comms block)
  }
}

void throw_nccl_error(const NcclLib& lib, ncclResult_t result, const char* call,
                      const char* file, int line) {
  const char* last = lib.ncclGetLastError ? lib.ncclGetLastError(nullptr) : nullptr;
  throw_error(nccl_result_code(result), file, line,
              format("%s failed: %s (%d)%s%s", call, lib.ncclGetErrorString(result),
                     static_cast<int>(result), last && *last ? ": " : "", last ? last : ""));
}

bool nccl_has_type(symcommDataType_t type, int version) {
  switch (type) {
    case symcommInt8: case symcommUint8: case symcommInt32: case symcommUint32:
    case symcommInt64: case symcommUint64: case symcommFloat16: case symcommFloat32:
    case symcommFloat64:
      return true;
    case symcommBfloat16:  // NCCL_VERSION(2, 10, 0), in the header and the library
      return NCCL_VERSION_CODE >= 21000 && version >= 21000;
    case symcommFloat8E4M3: case symcommFloat8E5M2:  // NCCL_VERSION(2, 24, 0)
      return NCCL_VERSION_CODE >= 22400 && version >= 22400;
    case symcommNumDataTypes: break;
  }
  return false;
}

ncclDataType_t nccl_type(symcommDataType_t type, int version) {
  switch (type) {
    case symcommInt8: return ncclInt8;
    case symcommUint8: return ncclUint8;
    case symcommInt32: return ncclInt32;
    case symcommUint32: return ncclUint32;
    case symcommInt64: return ncclInt64;
    case symcommUint64: return ncclUint64;
    case symcommFloat16: return ncclFloat16;
    case symcommFloat32: return ncclFloat32;
    case symcommFloat64: return ncclFloat64;
    case symcommBfloat16:
      SYMCOMM_REQUIRE(nccl_has_type(type, version), symcommNotSupported,
                      "bfloat16 needs NCCL 2.10 or later; this one is %s",
                      nccl_version_string(version).c_str());
#if NCCL_VERSION_CODE >= 21000
      return ncclBfloat16;
#else
      SYMCOMM_THROW(symcommNotSupported, "symcomm was built with nccl.h %d.%d, before bfloat16",
                    NCCL_MAJOR, NCCL_MINOR);
#endif
    case symcommFloat8E4M3: case symcommFloat8E5M2:
      SYMCOMM_REQUIRE(nccl_has_type(type, version), symcommNotSupported,
                      "fp8 needs NCCL 2.24 or later, in the header symcomm was built with and "
                      "the library; the library is %s", nccl_version_string(version).c_str());
#if NCCL_VERSION_CODE >= 22400
      return type == symcommFloat8E4M3 ? ncclFloat8e4m3 : ncclFloat8e5m2;
#else
      break;
#endif
    case symcommNumDataTypes: break;
  }
  SYMCOMM_THROW(symcommInvalidArgument, "type %d is not a symcommDataType_t",
                static_cast<int>(type));
}

ncclRedOp_t nccl_op(symcommRedOp_t op) {
  switch (op) {
    case symcommSum: return ncclSum;
    case symcommMin: return ncclMin;
    case symcommMax: return ncclMax;
    case symcommProd: return ncclProd;
    case symcommAvg: return ncclAvg;
    case symcommNumRedOps: break;
  }
  SYMCOMM_THROW(symcommInvalidArgument, "op %d is not a symcommRedOp_t", static_cast<int>(op));
}

void nccl_group(const NcclLib& lib, const std::function<void()>& body) {
  SYMCOMM_NCCL(lib, ncclGroupStart());
  try {
    body();
  } catch (...) {
    (void)lib.ncclGroupEnd();  // the error in flight is the one to report
    throw;
  }
  SYMCOMM_NCCL(lib, ncclGroupEnd());
}

#else  // !SYMCOMM_HAVE_NCCL

std::string nccl_unavailable_reason() {
  return "symcomm was built without nccl.h (CMake did not find it): NCCL is not available";
}

void keep_nccl_safe_once() {}

#endif

}  // namespace symcomm
