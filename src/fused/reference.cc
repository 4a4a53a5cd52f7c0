// The CPU reference of every fused operation, in the host memory space: what CI runs the
// API, its arguments and its errors with, and the oracle the GPU implementations are held
// to. The team's data moves through its transports (puts and gets to each member, complete
// when they return in the host space) between team barriers; the arithmetic is plain loops,
// partial sums in fp32 in team-rank order.
#include <cstring>
#include <vector>

#include "base/error.h"
#include "fused/fused.h"
#include "fused/numbers.h"
#include "transport/transport.h"

namespace symcomm {

namespace {

using fused::load;
using fused::store;

class Reference final : public FusedImplementation {
 public:
  const char* name() const override { return "reference"; }

  Verdict can_implement(const FusedShape&, const FusedContext& ctx) const override {
    if (ctx.space != symcommSpaceHost)
      return Verdict::no("a CPU reference: it runs in the host memory space only");
    return Verdict::yes();
  }

  size_t workspace_bytes(const FusedShape& s, const FusedContext&) const override {
    switch (s.op) {
      case symcommFusedAllGatherGemm:  // the gathered A
        return static_cast<size_t>(s.m * s.k) * fused_element_bytes(s.a_type);
      case symcommFusedGemmReduceScatter:  // this member's partial product, all of C's rows
        return static_cast<size_t>(s.m * s.n) * sizeof(float);
      default:
        return 0;  // the transpose reads the members' X where it is
    }
  }

  void run(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
           symcommStream_t stream) const override {
    if (s.op == symcommFusedAllGatherGemm) return all_gather_gemm(s, ctx, b, stream);
    if (s.op == symcommFusedGemmReduceScatter) return gemm_reduce_scatter(s, ctx, b, stream);
    transpose_accumulate(s, ctx, b, stream);
  }

 private:

  // B[kk][j] of a [K, N] matrix, or of its transpose given as [N, K].
  static float b_at(const FusedShape& s, const void* b, int64_t kk, int64_t j, int64_t k) {
    const size_t i = s.b_transposed ? static_cast<size_t>(j * k + kk)
                                    : static_cast<size_t>(kk * s.n + j);
    return load(s.b_type, b, i);
  }

  // C [rows, N] = A [rows, K] x B (of K rows), fp32 accumulation.
  static void gemm(const FusedShape& s, const void* a, const void* b, int64_t rows, int64_t k,
                   std::vector<float>* out) {
    out->assign(static_cast<size_t>(rows * s.n), 0.0f);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        float sum = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk)
          sum += load(s.a_type, a, static_cast<size_t>(i * k + kk)) * b_at(s, b, kk, j, k);
        (*out)[static_cast<size_t>(i * s.n + j)] = sum;
      }
  }

  // Every member puts its rows of A into every member's workspace, at their place in the
  // gathered A; between barriers (the one before: nobody still reads the last run's).
  static void all_gather_gemm(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                              symcommStream_t stream) {
    const size_t row_bytes = static_cast<size_t>(s.k) * fused_element_bytes(s.a_type);
    char* gathered = static_cast<char*>(b.workspace);
    const size_t mine = static_cast<size_t>(s.rows[static_cast<size_t>(ctx.me)]) * row_bytes;
    char* at = gathered + static_cast<size_t>(s.row_start[static_cast<size_t>(ctx.me)]) * row_bytes;
    team_barrier(ctx, stream);
    for (int t = 0; t < ctx.team.size; ++t)
      if (mine)
        member_transport(ctx, t).put(ctx.team.world_of(t), at, b.a, mine, symcommEngineAuto,
                                     stream);
    team_barrier(ctx, stream);
    std::vector<float> c;
    gemm(s, gathered, b.b, s.m, s.k, &c);
    for (size_t i = 0; i < c.size(); ++i) store(s.c_type, b.c, i, c[i]);
    if (b.gathered) std::memcpy(b.gathered, gathered, static_cast<size_t>(s.m) * row_bytes);
  }

  // Each member's partial product goes to its workspace; each member then reads its rows of
  // every member's partial and sums them in team-rank order.
  static void gemm_reduce_scatter(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                                  symcommStream_t stream) {
    const size_t me = static_cast<size_t>(ctx.me);
    std::vector<float> partial;
    gemm(s, b.a, b.b, s.m, s.cols[me], &partial);
    float* mine = static_cast<float*>(b.workspace);
    std::memcpy(mine, partial.data(), partial.size() * sizeof(float));
    team_barrier(ctx, stream);
    const size_t row_floats = static_cast<size_t>(s.n);
    const size_t rows = static_cast<size_t>(s.rows[me]);
    float* block = mine + static_cast<size_t>(s.row_start[me]) * row_floats;
    std::vector<float> sum(rows * row_floats, 0.0f), got(rows * row_floats);
    for (int t = 0; t < ctx.team.size && rows; ++t) {
      member_transport(ctx, t).get(ctx.team.world_of(t), got.data(), block,
                                   got.size() * sizeof(float), symcommEngineAuto, stream);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += got[i];
    }
    team_barrier(ctx, stream);  // every member read its rows of the partials here
    for (size_t i = 0; i < sum.size(); ++i) store(s.c_type, b.c, i, sum[i]);
  }

  // Member me's out [N, cols[me]] += the rows of block me of X, transposed: from member t's
  // X_t [N, cols[t]] its rows col_start[me] .. + cols[me], which hold X's columns of block t.
  static void transpose_accumulate(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                                   symcommStream_t stream) {
    const size_t me = static_cast<size_t>(ctx.me), elem = fused_element_bytes(s.a_type);
    const int64_t w = s.cols[me];
    team_barrier(ctx, stream);  // every member's X is written
    std::vector<char> block;
    for (int t = 0; t < ctx.team.size && w; ++t) {
      const int64_t wt = s.cols[static_cast<size_t>(t)];
      if (!wt) continue;
      block.resize(static_cast<size_t>(w * wt) * elem);
      const char* from =
          static_cast<const char*>(b.a) + static_cast<size_t>(s.col_start[me] * wt) * elem;
      member_transport(ctx, t).get(ctx.team.world_of(t), block.data(), from, block.size(),
                                   symcommEngineAuto, stream);
      // block[j][i] = X[col_start[me] + j][col_start[t] + i] -> out[col_start[t] + i][j].
      const int64_t first = s.col_start[static_cast<size_t>(t)];
      for (int64_t j = 0; j < w; ++j)
        for (int64_t i = 0; i < wt; ++i) {
          const size_t o = static_cast<size_t>((first + i) * w + j);
          const float x = load(s.a_type, block.data(), static_cast<size_t>(j * wt + i));
          store(s.c_type, b.c, o, load(s.c_type, b.c, o) + x);
        }
    }
    team_barrier(ctx, stream);  // nobody changes X before every member read it
  }
};

const Registered<FusedImplementation, Reference> kRegistered(100);

}  // namespace

}  // namespace symcomm
