// Probe (nvcc -arch=sm_90 cublaslt_rows.cu -lcublasLt -o cublaslt_rows): is one cuBLASLt GEMM
// right in every row where the GPU is shared? The fused layer's `sequential` all-gather + GEMM
// on 3 ranks sharing one H200 under MPS at 33% of the threads each gave C's rows 5120-6143
// wrong (M 6144, K 4096, N 128; docs/fused.md, "Limits") while the same rows multiplied in
// blocks of 2048 were right. This makes the call fused_gemm makes (row-major C = A x B as
// column-major C^T = B^T A^T, bf16 in, fp32 out, no workspace, the alignment preferences)
// on small integers, whose products and sums fp32 holds exactly, by each algorithm the
// heuristic offers (the first is fused_gemm's), and prints the rows of C that differ from the
// CPU's. Each is tried as fused_gemm asks (no workspace), with the SM count the context reports
// as cuBLASLt's target (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), with the GPU's whole count (from
// %nsmid) as the target, and with 32 MiB of workspace allowed. It exits 1 where the first
// algorithm as fused_gemm asks is wrong. Run it alone, then as an MPS client with
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=33: SUITES=cublaslt_rows tools/probe/shared_gpus.sh 3
// runs it in 3 MPS clients at once.
//   cublaslt_rows [M N K]   (default 6144 128 4096)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"  // CK

// The GPU's SM ids (%nsmid: every SM of the GPU, however few this context may use).
__global__ void sm_ids(int* out) {
  int n;
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(n));
  *out = n;
}

#define LT(x)                                                                        \
  do {                                                                               \
    cublasStatus_t s_ = (x);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

int main(int argc, char** argv) {
  const bool given = argc > 3;
  const int64_t m = given ? std::atoll(argv[1]) : 6144, n = given ? std::atoll(argv[2]) : 128,
                k = given ? std::atoll(argv[3]) : 4096;
  int sms = 0, *d_ids = nullptr, ids = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaMalloc(&d_ids, sizeof(int)));
  sm_ids<<<1, 1>>>(d_ids);
  CK(cudaGetLastError());
  CK(cudaMemcpy(&ids, d_ids, sizeof ids, cudaMemcpyDeviceToHost));
  std::printf("cuBLASLt %zu, %d SMs reported, %d SM ids on the GPU\n", cublasLtGetVersion(), sms,
              ids);
  std::vector<float> a(m * k), b(k * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7 + 3) % 9 - 4);
  for (int64_t i = 0; i < k * n; ++i) b[i] = static_cast<float>((i * 5 + 1) % 7 - 3);
  std::vector<__nv_bfloat16> ha(a.size()), hb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ha[i] = __float2bfloat16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) hb[i] = __float2bfloat16(b[i]);
  const size_t ws_bytes = size_t{32} << 20;
  void *da, *db, *dc, *ws;
  CK(cudaMalloc(&da, ha.size() * 2));
  CK(cudaMalloc(&db, hb.size() * 2));
  CK(cudaMalloc(&dc, m * n * 4));
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMemcpy(da, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t t = 0; t < k; ++t) sum += a[i * k + t] * b[t * n + j];
      want[i * n + j] = sum;
    }

  cublasLtHandle_t h;
  LT(cublasLtCreate(&h));
  cublasLtMatrixLayout_t la, lb, lc;  // cuBLASLt's A is our B [n, k] column-major, ld n
  LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, k, n));
  LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));  // our A
  LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n));   // our C
  int64_t first_wrong = 0;
  const char* modes[4] = {"as fused_gemm", "target reported SMs", "target the GPU's SMs",
                          "32 MiB workspace"};
  for (int mode = 0; mode < 4; ++mode) {
    cublasLtMatmulDesc_t op;
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (mode == 1 || mode == 2) {
      const int32_t target = mode == 1 ? sms : ids;
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target,
                                        sizeof target));
    }
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    const size_t allowed = mode == 3 ? ws_bytes : 0;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &allowed, sizeof allowed));
    // Every algorithm the heuristic offers (up to 8), each with its configuration.
    cublasLtMatmulHeuristicResult_t algos[8]{};
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, algos, &found));
    if (!found) return std::printf("no algorithm\n"), 1;
    for (int r = 0; r < found; ++r) {
      const cublasLtMatmulAlgo_t& algo = algos[r].algo;
      int id = -1, tile = -1, splitk = -1, scheme = -1, stages = -1, cluster = -1;
      size_t got = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                           sizeof tile, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                           sizeof splitk, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                           sizeof scheme, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                           sizeof stages, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                           &cluster, sizeof cluster, &got);
      CK(cudaMemset(dc, 0xFF, m * n * 4));  // NaN: a row never written shows
      const float alpha = 1, beta = 0;
      LT(cublasLtMatmul(h, op, &alpha, db, la, da, lb, &beta, dc, lc, dc, lc, &algo,
                        mode == 3 ? ws : nullptr, mode == 3 ? ws_bytes : 0, nullptr));
      CK(cudaDeviceSynchronize());
      std::vector<float> c(m * n);
      CK(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
      int64_t first = -1, last = -1, wrong_rows = 0;
      for (int64_t i = 0; i < m; ++i) {
        bool wrong = false;
        for (int64_t j = 0; j < n && !wrong; ++j)
          wrong = !(c[i * n + j] == static_cast<float>(want[i * n + j]));
        if (!wrong) continue;
        ++wrong_rows;
        if (first < 0) first = i;
        last = i;
      }
      if (mode == 0 && r == 0) first_wrong = wrong_rows;
      std::printf("M %lld N %lld K %lld, %s, algorithm %d of %d (id %d tile %d split-k %d "
                  "reduction %d stages %d cluster %d, %zu B workspace): %lld rows wrong",
                  static_cast<long long>(m), static_cast<long long>(n),
                  static_cast<long long>(k), modes[mode], r, found, id, tile, splitk, scheme,
                  stages, cluster, algos[r].workspaceSize, static_cast<long long>(wrong_rows));
      if (wrong_rows) std::printf(" (rows %lld to %lld)", static_cast<long long>(first),
                                  static_cast<long long>(last));
      std::printf("\n");
    }
    LT(cublasLtMatmulPreferenceDestroy(pref));
    LT(cublasLtMatmulDescDestroy(op));
  }
  return first_wrong != 0;
}
