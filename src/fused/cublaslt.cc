#include "fused/cublaslt.h"

#include <dlfcn.h>

#include "base/error.h"
#include "base/log.h"
#include "base/param.h"

namespace symcomm {

namespace {

const StringParam kLibrary(
    "SYMCOMM_CUBLASLT_LIBRARY", "",
    "the cuBLASLt that the fused implementations load (a name for dlopen or a path); empty: "
    "libcublasLt.so.13, then libcublasLt.so.12");

struct Load {
  CublasLtLib lib;
  bool ok = false;
  std::string reason;
};

Load load(const char* path) {
  Load l;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    l.reason = format("cuBLASLt cannot be loaded (%s): %s", path, e ? e : "dlopen failed");
    return l;
  }
#define SYMCOMM_LOAD_CUBLASLT_PFN(fn)                                    \
  {                                                                      \
    void* p = dlsym(handle, #fn);                                        \
    if (!p) {                                                            \
      l.reason = format("%s lacks %s", path, #fn);                       \
      dlclose(handle);                                                   \
      return l;                                                          \
    }                                                                    \
    l.lib.fn = reinterpret_cast<decltype(l.lib.fn)>(p);                  \
  }
  SYMCOMM_CUBLASLT_FUNCTIONS(SYMCOMM_LOAD_CUBLASLT_PFN)
#undef SYMCOMM_LOAD_CUBLASLT_PFN
  l.lib.version = l.lib.cublasLtGetVersion();
  l.ok = true;
  return l;
}

const Load& loaded() {
  static const Load l = [] {
    const std::string named = kLibrary.get();
    if (!named.empty()) return load(named.c_str());
    Load first = load("libcublasLt.so.13");
    if (first.ok) return first;
    Load second = load("libcublasLt.so.12");
    if (second.ok) return second;
    first.reason += "; " + second.reason;
    return first;
  }();
  return l;
}

}  // namespace

const CublasLtLib* CublasLtLib::get() { return loaded().ok ? &loaded().lib : nullptr; }

std::string cublaslt_unavailable_reason() { return loaded().ok ? "" : loaded().reason; }

void check_cublaslt(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(status == CUBLAS_STATUS_NOT_SUPPORTED ? symcommNotSupported : symcommInternalError,
              format("%s failed with cuBLAS status %d [%s:%d]", call, static_cast<int>(status),
                     file, line));
}

}  // namespace symcomm
