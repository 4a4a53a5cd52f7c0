// NCCL, loaded at run time with dlopen (SYMCOMM_NCCL_LIBRARY, default "libnccl.so.2") so that
// libsymcomm starts on machines without NCCL or without a GPU: symcomm never links -lnccl.
// The types and prototypes come from nccl.h where CMake found it at build time
// (SYMCOMM_HAVE_NCCL); without it, NCCL is "not available" and only nccl_unavailable_reason()
// exists.
//
// Loading sets NCCL_NVLS_ENABLE=0 and NCCL_GRAPH_REGISTER=0 in the environment, overriding
// (with a warning) any other value the caller set: NVLink multicast (NVLS) is forbidden on
// the machines symcomm runs on, and in CUDA graph captures NCCL would register the symmetric
// heap's buffers and not the others, a mix within one call that NCCL does not allow. NCCL
// reads both when it first initialises, so they are set before any NCCL call (nccl_lib.cc).
#pragma once

#include <functional>
#include <string>

#include "base/error.h"

#ifdef SYMCOMM_HAVE_NCCL
#include <nccl.h>
#endif

namespace symcomm {

// Why NCCL cannot be used in this process ("" when it can): built without nccl.h, or the
// library cannot be loaded. Loads it on the first call.
std::string nccl_unavailable_reason();

// Sets NCCL_NVLS_ENABLE and NCCL_GRAPH_REGISTER to 0 in the environment (see nccl_lib.cc),
// once per process. symcommInit calls it first, before the communicator starts a thread, so
// that no later call changes the environment while symcomm's threads read it; loading NCCL
// does it again (a no-op where both are 0 already). Built without nccl.h, symcomm never
// loads NCCL and leaves the environment alone.
void keep_nccl_safe_once();

#ifdef SYMCOMM_HAVE_NCCL

// The entry points symcomm uses, looked up by name with dlsym.
#define SYMCOMM_NCCL_FUNCTIONS(X)                                                        \
  X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclCommInitRank)        \
  X(ncclCommDestroy) X(ncclCommAbort) X(ncclAllGather) X(ncclAllReduce)                 \
  X(ncclReduceScatter) X(ncclBroadcast) X(ncclReduce) X(ncclSend) X(ncclRecv)           \
  X(ncclGroupStart) X(ncclGroupEnd)

struct NcclLib {
#define SYMCOMM_DECLARE_NCCL_PFN(fn) decltype(&::fn) fn = nullptr;
  SYMCOMM_NCCL_FUNCTIONS(SYMCOMM_DECLARE_NCCL_PFN)
#undef SYMCOMM_DECLARE_NCCL_PFN
  // Optional (NCCL 2.13 and later; nullptr before): the last error's details, for messages.
  decltype(&::ncclGetLastError) ncclGetLastError = nullptr;
  int version = 0;  // ncclGetVersion: 22809 for 2.28.9 (2804 for 2.8.4)

  // The library of SYMCOMM_NCCL_LIBRARY, loaded once; nullptr when it cannot be (see
  // nccl_unavailable_reason()).
  static const NcclLib* get();
};

// The result of loading `path` (not cached: get() calls it once; tests call it directly).
struct NcclLoad {
  NcclLib lib;
  bool ok = false;
  std::string reason;  // why not ok: "libnccl.so.2: cannot open shared object file ..."
};
NcclLoad load_nccl(const char* path);

// The library or throws symcommNotSupported with the reason.
const NcclLib& nccl_lib();

// "2.28.9" for 22809, "2.8.4" for 2804.
std::string nccl_version_string(int version);

// Throws the symcomm error for `result` (symcommCudaError for ncclUnhandledCudaError, ...)
// naming the call, ncclGetErrorString and, where NCCL has it, ncclGetLastError.
[[noreturn]] void throw_nccl_error(const NcclLib& lib, ncclResult_t result, const char* call,
                                   const char* file, int line);
symcommResult_t nccl_result_code(ncclResult_t result);

// The NCCL type of a symcomm type; bfloat16 needs NCCL 2.10 or later (`version` as
// NcclLib::version). nccl_has_type says whether nccl_type would succeed; nccl_type throws
// symcommNotSupported (bfloat16 on an older NCCL) or symcommInvalidArgument (not a type).
bool nccl_has_type(symcommDataType_t type, int version);
ncclDataType_t nccl_type(symcommDataType_t type, int version);
// The NCCL reduction of a symcomm one; throws symcommInvalidArgument.
ncclRedOp_t nccl_op(symcommRedOp_t op);

// Runs `body` between ncclGroupStart and ncclGroupEnd (the group is ended if it throws).
void nccl_group(const NcclLib& lib, const std::function<void()>& body);

#endif  // SYMCOMM_HAVE_NCCL

}  // namespace symcomm

#ifdef SYMCOMM_HAVE_NCCL
// Checks a call made through an NcclLib `lib`: SYMCOMM_NCCL(lib, ncclGroupEnd()).
#define SYMCOMM_NCCL(lib, call)                                                         \
  do {                                                                                  \
    ncclResult_t symcomm_nccl_result_ = (lib).call;                                     \
    if (symcomm_nccl_result_ != ncclSuccess)                                            \
      ::symcomm::throw_nccl_error((lib), symcomm_nccl_result_, #call, __FILE__, __LINE__); \
  } while (0)
#endif
