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

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "fused/convert.cuh"
#include "fused/fused.h"
#include "fused/gemm.h"
#include "fused/sum_blocks.h"
#include "transport/transport.h"

namespace symcomm {

namespace {

using fused_detail::from_float;
using fused_detail::to_float;

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

class Sequential final : public FusedImplementation {
 public:
  const char* name() const override { return "sequential"; }

  Verdict can_implement(const FusedShape& s, const FusedContext& ctx) const override {
    if (ctx.space != symcommSpaceCuda)
      return Verdict::no("it runs in the cuda memory space only (kernels and cuBLASLt)");
    if (s.op == symcommFusedTransposeAccumulate) return Verdict::yes();
    return fused_gemm_verdict(s);
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
    fused_gemm(ctx.topology.device, cuda(stream), s.m, s.n, s.k, s.a_type, gathered, b.b,
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
    fused_gemm(ctx.topology.device, cuda(stream), s.m, s.n, s.cols[me], s.a_type, b.a, b.b,
         s.b_transposed, symcommFloat32, partial);
    team_barrier(ctx, stream);
    const size_t count = static_cast<size_t>(s.rows[me] * s.n);
    float* mine = partial + static_cast<size_t>(s.row_start[me] * s.n);
    for (int t = 0; t < ctx.team.size && count; ++t)
      member_transport(ctx, t).get(ctx.team.world_of(t),
                                   received + static_cast<size_t>(t) * stride, mine,
                                   count * sizeof(float), symcommEngineAuto, stream);
    sum_blocks(received, stride, ctx.team.size, count, s.c_type, b.c, cuda(stream));
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
const KernelLibrary kKernels(reinterpret_cast<const void*>(&transpose_accumulate_kernel<float>));

}  // namespace

}  // namespace symcomm
