// The sequential implementation, in the cuda space: the communication, then cuBLASLt, one
// after the other on the stream, with the team's transports and barriers as the reference
// moves its data. The in-run baseline of the fused implementations (docs/fused.md).
//   all-gather + GEMM: each member puts its rows of A into every member's workspace between
//     two team barriers; one cuBLASLt GEMM on the gathered A.
//   GEMM + reduce-scatter: one cuBLASLt GEMM into an fp32 partial product in the workspace;
//     after a barrier each member gets its rows of every member's partial and a kernel sums
//     them in team-rank order, converting to C's type.
//   transpose + accumulate: each member gets the rows of every member's X that hold its
//     block into the workspace; a kernel per member adds them, transposed, to out.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "fused/cublaslt.h"
#include "fused/fused.h"
#include "transport/transport.h"

namespace symcomm {

namespace {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// c[i] = the sum over t < members of blocks[t * stride + i], i < count, in t's order.
template <typename Out>
__global__ void sum_blocks_kernel(const float* blocks, size_t stride, int members, size_t count,
                                  Out* c) {
  pdl_begin();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int t = 0; t < members; ++t) s += blocks[static_cast<size_t>(t) * stride + i];
    c[i] = from_float<Out>(s);
  }
}

// out [N, w] row-major: out[(first + i) * w + j] += block[j * wt + i], for the block [w, wt]
// of one member (its X's rows of this member's block: X's columns first .. first + wt).
template <typename T>
__global__ void transpose_accumulate_kernel(const T* block, int64_t w, int64_t wt, int64_t first,
                                            T* out) {
  pdl_begin();
  const size_t count = static_cast<size_t>(w * wt);
  for (size_t e = blockIdx.x * size_t{blockDim.x} + threadIdx.x; e < count;
       e += size_t{gridDim.x} * blockDim.x) {
    const int64_t i = static_cast<int64_t>(e) / w, j = static_cast<int64_t>(e) % w;
    T* o = out + (first + i) * w + j;
    *o = from_float<T>(to_float(*o) + to_float(block[j * wt + i]));
  }
}

unsigned blocks_for(size_t count) {
  return static_cast<unsigned>(std::min<size_t>((count + 255) / 256, 1024));
}

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

// Row-major c [m, n] = a [m, k] x b, b [k, n] (or [n, k] where transposed), fp32 accumulation,
// on `stream`. Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's A is our B.
void gemm(int device, cudaStream_t stream, int64_t m, int64_t n, int64_t k,
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

class Sequential final : public FusedImplementation {
 public:
  const char* name() const override { return "sequential"; }

  Verdict can_implement(const FusedShape& s, const FusedContext& ctx) const override {
    if (ctx.space != symcommSpaceCuda)
      return Verdict::no("it runs in the cuda memory space only (kernels and cuBLASLt)");
    if (s.op == symcommFusedTransposeAccumulate) return Verdict::yes();
    if (std::string why = cublaslt_unavailable_reason(); !why.empty()) return Verdict::no(why);
    if (s.c_type != s.a_type && s.c_type != symcommFloat32)
      return Verdict::no("cuBLASLt writes C in the inputs' type or in float32, not in the other "
                         "16-bit type");
    return Verdict::yes();
  }

  size_t workspace_bytes(const FusedShape& s, const FusedContext&) const override {
    const size_t ea = fused_element_bytes(s.a_type);
    switch (s.op) {
      case symcommFusedAllGatherGemm:  // the gathered A
        return static_cast<size_t>(s.m * s.k) * ea;
      case symcommFusedGemmReduceScatter: {  // the partial, then every member's rows of it
        const int64_t most = *std::max_element(s.rows.begin(), s.rows.end());
        return static_cast<size_t>(s.m * s.n) * 4 +
               s.rows.size() * static_cast<size_t>(most * s.n) * 4;
      }
      default: {  // the rows of every member's X that hold this member's block
        const int64_t most = *std::max_element(s.cols.begin(), s.cols.end());
        return static_cast<size_t>(most * s.n) * ea;
      }
    }
  }

  void run(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
           symcommStream_t stream) const override {
    DeviceScope scope(ctx.topology.device);
    if (s.op == symcommFusedAllGatherGemm) return all_gather_gemm(s, ctx, b, stream);
    if (s.op == symcommFusedGemmReduceScatter) return gemm_reduce_scatter(s, ctx, b, stream);
    transpose_accumulate(s, ctx, b, stream);
  }

 private:
  static cudaStream_t cuda(symcommStream_t s) { return static_cast<cudaStream_t>(s); }

  static void all_gather_gemm(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                              symcommStream_t stream) {
    const size_t row_bytes = static_cast<size_t>(s.k) * fused_element_bytes(s.a_type);
    const size_t me = static_cast<size_t>(ctx.me);
    char* gathered = static_cast<char*>(b.workspace);
    const size_t mine = static_cast<size_t>(s.rows[me]) * row_bytes;
    char* at = gathered + static_cast<size_t>(s.row_start[me]) * row_bytes;
    team_barrier(ctx, stream);  // nobody still multiplies the last run's gathered A
    for (int t = 0; t < ctx.team.size; ++t)
      if (mine)
        member_transport(ctx, t).put(ctx.team.world_of(t), at, b.a, mine, symcommEngineAuto,
                                     stream);
    team_barrier(ctx, stream);
    gemm(ctx.topology.device, cuda(stream), s.m, s.n, s.k, s.a_type, gathered, b.b,
         s.b_transposed, s.c_type, b.c);
    if (b.gathered)
      SYMCOMM_CUDART(cudaMemcpyAsync(b.gathered, gathered, static_cast<size_t>(s.m) * row_bytes,
                                     cudaMemcpyDeviceToDevice, cuda(stream)));
  }

  static void gemm_reduce_scatter(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                                  symcommStream_t stream) {
    const size_t me = static_cast<size_t>(ctx.me);
    float* partial = static_cast<float*>(b.workspace);
    const int64_t most = *std::max_element(s.rows.begin(), s.rows.end());
    const size_t stride = static_cast<size_t>(most * s.n);  // floats per member's rows
    float* received = partial + static_cast<size_t>(s.m * s.n);
    gemm(ctx.topology.device, cuda(stream), s.m, s.n, s.cols[me], s.a_type, b.a, b.b,
         s.b_transposed, symcommFloat32, partial);
    team_barrier(ctx, stream);
    const size_t count = static_cast<size_t>(s.rows[me] * s.n);
    float* mine = partial + static_cast<size_t>(s.row_start[me] * s.n);
    for (int t = 0; t < ctx.team.size && count; ++t)
      member_transport(ctx, t).get(ctx.team.world_of(t),
                                   received + static_cast<size_t>(t) * stride, mine,
                                   count * sizeof(float), symcommEngineAuto, stream);
    if (count) {
      const int members = ctx.team.size;
      if (s.c_type == symcommFloat32)
        launch_kernel(sum_blocks_kernel<float>, blocks_for(count), 256, cuda(stream), received,
                      stride, members, count, static_cast<float*>(b.c));
      else if (s.c_type == symcommFloat16)
        launch_kernel(sum_blocks_kernel<__half>, blocks_for(count), 256, cuda(stream), received,
                      stride, members, count, static_cast<__half*>(b.c));
      else
        launch_kernel(sum_blocks_kernel<__nv_bfloat16>, blocks_for(count), 256, cuda(stream),
                      received, stride, members, count, static_cast<__nv_bfloat16*>(b.c));
      SYMCOMM_CUDART(cudaGetLastError());
    }
    team_barrier(ctx, stream);  // every member read its rows of the partials here
  }

  template <typename T>
  static void accumulate(const FusedShape& s, const FusedContext& ctx, const char* staged,
                         void* out, cudaStream_t stream) {
    const size_t me = static_cast<size_t>(ctx.me), elem = sizeof(T);
    const int64_t w = s.cols[me];
    for (int t = 0; t < ctx.team.size; ++t) {
      const int64_t wt = s.cols[static_cast<size_t>(t)];
      const int64_t first = s.col_start[static_cast<size_t>(t)];
      if (!wt) continue;
      const T* block = reinterpret_cast<const T*>(staged + static_cast<size_t>(first * w) * elem);
      launch_kernel(transpose_accumulate_kernel<T>, blocks_for(static_cast<size_t>(w * wt)), 256,
                    stream, block, w, wt, first, static_cast<T*>(out));
      SYMCOMM_CUDART(cudaGetLastError());
    }
  }

  static void transpose_accumulate(const FusedShape& s, FusedContext& ctx,
                                   const FusedBuffers& b, symcommStream_t stream) {
    const size_t me = static_cast<size_t>(ctx.me), elem = fused_element_bytes(s.a_type);
    const int64_t w = s.cols[me];
    char* staged = static_cast<char*>(b.workspace);
    team_barrier(ctx, stream);  // every member's X is written
    for (int t = 0; t < ctx.team.size && w; ++t) {
      const int64_t wt = s.cols[static_cast<size_t>(t)];
      if (!wt) continue;
      const char* from =
          static_cast<const char*>(b.a) + static_cast<size_t>(s.col_start[me] * wt) * elem;
      member_transport(ctx, t).get(
          ctx.team.world_of(t),
          staged + static_cast<size_t>(s.col_start[static_cast<size_t>(t)] * w) * elem, from,
          static_cast<size_t>(w * wt) * elem, symcommEngineAuto, stream);
    }
    if (w) {
      if (s.a_type == symcommFloat32) accumulate<float>(s, ctx, staged, b.c, cuda(stream));
      else if (s.a_type == symcommFloat16) accumulate<__half>(s, ctx, staged, b.c, cuda(stream));
      else accumulate<__nv_bfloat16>(s, ctx, staged, b.c, cuda(stream));
    }
    team_barrier(ctx, stream);  // nobody changes X before every member read it
  }
};

const Registered<FusedImplementation, Sequential> kRegistered(10);
const KernelLibrary kKernels(reinterpret_cast<const void*>(&sum_blocks_kernel<float>));

}  // namespace

}  // namespace symcomm
