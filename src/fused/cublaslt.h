// cuBLASLt, loaded at run time with dlopen (SYMCOMM_CUBLASLT_LIBRARY, default
// "libcublasLt.so.13", then ".12"), as NCCL is: libsymcomm starts where it is missing, and
// only the fused implementations that multiply with it say so. Types and prototypes come from
// the CUDA toolkit's cublasLt.h.
#pragma once

#include <cublasLt.h>

#include <string>

namespace symcomm {

#define SYMCOMM_CUBLASLT_FUNCTIONS(X)                                                        \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmul)              \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                               \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                       \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic)

struct CublasLtLib {
#define SYMCOMM_DECLARE_CUBLASLT_PFN(fn) decltype(&::fn) fn = nullptr;
  SYMCOMM_CUBLASLT_FUNCTIONS(SYMCOMM_DECLARE_CUBLASLT_PFN)
#undef SYMCOMM_DECLARE_CUBLASLT_PFN
  size_t version = 0;

  // The library, loaded once; nullptr where it cannot be (cublaslt_unavailable_reason()).
  static const CublasLtLib* get();
};

// Why cuBLASLt cannot be used here ("" where it can). Loads it on the first call.
std::string cublaslt_unavailable_reason();

// Throws symcommInternalError naming the call where a cuBLASLt status is not success.
void check_cublaslt(cublasStatus_t status, const char* call, const char* file, int line);
#define SYMCOMM_CUBLASLT(call) ::symcomm::check_cublaslt((call), #call, __FILE__, __LINE__)

}  // namespace symcomm
