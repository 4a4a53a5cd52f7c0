#include "fused/gemm.h"

#include <map>
#include <mutex>
#include <string>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "fused/cublaslt.h"
#include "fused/fused.h"

namespace symcomm {

namespace {

cudaDataType_t cuda_type(symcommDataType_t t) {
  return t == symcommFloat16 ? CUDA_R_16F : t == symcommBfloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// The calling thread's device's cuBLASLt handle, made once per device.
cublasLtHandle_t handle(const CublasLtLib& lt, int device) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t h = nullptr;
  SYMCOMM_CUBLASLT(lt.cublasLtCreate(&h));
  handles.emplace(device, h);
  return h;
}

}  // namespace

Verdict fused_gemm_verdict(const FusedShape& s) {
  if (std::string why = cublaslt_unavailable_reason(); !why.empty()) return Verdict::no(why);
  if (s.c_type != s.a_type && s.c_type != symcommFloat32)
    return Verdict::no("cuBLASLt writes C in the inputs' type or in float32, not in the other "
                       "16-bit type");
  return Verdict::yes();
}

// Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's A is our B.
void fused_gemm(int device, cudaStream_t stream, int64_t m, int64_t n, int64_t k,
          symcommDataType_t in, const void* a, const void* b, bool b_transposed,
          symcommDataType_t out, void* c) {
  if (m == 0 || n == 0) return;
  const size_t c_bytes = static_cast<size_t>(m * n) * fused_element_bytes(out);
  if (k == 0) {
    SYMCOMM_CUDART(cudaMemsetAsync(c, 0, c_bytes, stream));  // an empty sum
    return;
  }
  const CublasLtLib& lt = *CublasLtLib::get();
  cublasLtHandle_t h = handle(lt, device);
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto release = [&] {
    if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {la, lb, lc})
      if (l) lt.cublasLtMatrixLayoutDestroy(l);
    if (op) lt.cublasLtMatmulDescDestroy(op);
  };
  try {
    SYMCOMM_CUBLASLT(lt.cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    SYMCOMM_CUBLASLT(lt.cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans,
                                                       sizeof trans));
    const uint64_t un = static_cast<uint64_t>(n), uk = static_cast<uint64_t>(k),
                   um = static_cast<uint64_t>(m);
    // Our B, column-major: [n, k] with ld n, or (transposed) [k, n] with ld k under op T.
    SYMCOMM_CUBLASLT(lt.cublasLtMatrixLayoutCreate(&la, cuda_type(in), b_transposed ? uk : un,
                                                   b_transposed ? un : uk,
                                                   static_cast<int64_t>(b_transposed ? uk : un)));
    SYMCOMM_CUBLASLT(lt.cublasLtMatrixLayoutCreate(&lb, cuda_type(in), uk, um, k));  // our A
    SYMCOMM_CUBLASLT(lt.cublasLtMatrixLayoutCreate(&lc, cuda_type(out), un, um, n));  // our C
    SYMCOMM_CUBLASLT(lt.cublasLtMatmulPreferenceCreate(&pref));
    const size_t no_workspace = 0;
    SYMCOMM_CUBLASLT(lt.cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &no_workspace, sizeof no_workspace));
    // The heuristic assumes 256-byte aligned matrices unless told: tell it how each is.
    auto alignment = [](const void* p) {
      const auto u = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) & 255u);
      return u == 0 ? 256u : (u & (~u + 1u));  // the lowest set bit
    };
    const uint32_t aligned[3] = {alignment(b), alignment(a), alignment(c)};
    const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      SYMCOMM_CUBLASLT(lt.cublasLtMatmulPreferenceSetAttribute(
          pref, which[i], &aligned[i < 3 ? i : 2], sizeof(uint32_t)));
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    SYMCOMM_CUBLASLT(lt.cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &best,
                                                       &found));
    SYMCOMM_REQUIRE(found > 0, symcommNotSupported,
                    "cuBLASLt has no algorithm for a %lld x %lld x %lld GEMM of these types",
                    static_cast<long long>(m), static_cast<long long>(n),
                    static_cast<long long>(k));
    const float alpha = 1.0f, beta = 0.0f;
    SYMCOMM_CUBLASLT(lt.cublasLtMatmul(h, op, &alpha, b, la, a, lb, &beta, c, lc, c, lc,
                                       &best.algo, nullptr, 0, stream));
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace symcomm
