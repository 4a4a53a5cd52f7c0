// The pipelined implementation, in the cuda space: the communication runs on a side stream
// beside the GEMMs, one flag a member; each GEMM waits only for the rows it multiplies. The
// moves are the transports' put-signals (copy engines to members on this node: no SMs), the
// waits stream memory operations (docs/fused.md).
//   all-gather + GEMM: each member pushes its rows of A into every member's workspace, then
//     sets its flag there; meanwhile the stream multiplies this member's own rows, then each
//     member's rows once its flag is set, in the order they arrive (the member before first).
//   GEMM + reduce-scatter: the stream multiplies the partial product's rows of each other
//     member in turn (the member after first), and the side stream pushes each block to its
//     owner as soon as it is done; this member's own rows last, into its own slot; then it
//     waits for every member's flag and sums the slots in team-rank order, as sequential does.
//     A block goes in pieces of rows (pieces_of), each pushed once its GEMM is done.
// Every run starts with a team barrier (nobody still reads what this run overwrites) after
// clearing this member's flags; the flags are then set to 1, 2, ... (a piece each) and waited
// for, so a CUDA graph that captured a run replays it. The automatic choice takes it for long
// GEMMs (suits); sequential does the rest.
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "fused/fused.h"
#include "fused/gemm.h"
#include "fused/side_stream.h"
#include "fused/sum_blocks.h"
#include "transport/transport.h"

namespace symcomm {

namespace {

class Pipelined final : public FusedImplementation {
 public:
  const char* name() const override { return "pipelined"; }

  Verdict can_implement(const FusedShape& s, const FusedContext& ctx) const override {
    if (ctx.space != symcommSpaceCuda)
      return Verdict::no("it runs in the cuda memory space only (cuBLASLt and stream waits)");
    if (s.op == symcommFusedTransposeAccumulate)
      return Verdict::no("it pipelines GEMMs; the transpose is sequential's");
    return fused_gemm_verdict(s);
  }

  // Where the GEMM is long: on 2 x H200 it beat sequential from 2048^3 on (all-gather + GEMM
  // 57 us against 70; GEMM + reduce-scatter 70 against 89) and lost at 1024^3 (49 against 44;
  // 58 against 54), where splitting the GEMM and the barrier cost as much as it hides.
  bool suits(const FusedShape& s, const FusedContext&) const override {
    return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
               static_cast<double>(s.k) >= kSuitsFlops;
  }
  static constexpr double kSuitsFlops = 16e9;

  size_t workspace_bytes(const FusedShape& s, const FusedContext&) const override {
    if (s.op == symcommFusedAllGatherGemm)  // the flags, the gathered A
      return flags_bytes(s) + static_cast<size_t>(s.m * s.k) * fused_element_bytes(s.a_type);
    // The flags, the partial product, every member's block of this member's rows.
    const int64_t most = *std::max_element(s.rows.begin(), s.rows.end());
    return flags_bytes(s) + static_cast<size_t>(s.m * s.n) * 4 +
           s.rows.size() * static_cast<size_t>(most * s.n) * 4;
  }

  void run(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
           symcommStream_t stream) const override {
    DeviceScope scope(ctx.topology.device);
    Side& side = side_of(ctx.topology.device);
    std::lock_guard<std::mutex> lock(side.mutex);
    uint64_t* flags = static_cast<uint64_t*>(b.workspace);
    const cudaStream_t main = static_cast<cudaStream_t>(stream);
    SYMCOMM_CUDART(cudaMemsetAsync(flags, 0, flags_bytes(s), main));
    team_barrier(ctx, stream);
    follow(side, main, side.stream);
    if (s.op == symcommFusedAllGatherGemm) all_gather_gemm(s, ctx, b, main, side);
    else gemm_reduce_scatter(s, ctx, b, main, side);
    follow(side, side.stream, main);  // the pushes read A (or the partial) no longer
  }

 private:
  // A push of `bytes` from `src` to the symmetric `dst` of team member t, then its flag `me`
  // set to 1 there, on the side stream: copy engines where t is mapped.
  static void push(FusedContext& ctx, int t, void* dst, const void* src, size_t bytes,
                   uint64_t* flags, uint64_t value, Side& side) {
    Transport& to = member_transport(ctx, t);
    to.put_signal(ctx.team.world_of(t), dst, src, bytes, flags + ctx.me, value, symcommSignalSet,
                  to.load_store() ? symcommEngineCe : symcommEngineAuto, side.stream);
  }

  // Member t's flag here reaches `value` (its pushes set it in order: 1, 2, ...).
  static void wait_flag(FusedContext& ctx, uint64_t* flags, int t, uint64_t value,
                        cudaStream_t main) {
    ctx.rma.backend().wait(flags + t, symcommCmpGe, value, main);
  }

  static void all_gather_gemm(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                              cudaStream_t main, Side& side) {
    const int n = ctx.team.size, me = ctx.me;
    const size_t row_bytes = static_cast<size_t>(s.k) * fused_element_bytes(s.a_type);
    const size_t c_row = static_cast<size_t>(s.n) * fused_element_bytes(s.c_type);
    uint64_t* flags = static_cast<uint64_t*>(b.workspace);
    char* gathered = static_cast<char*>(b.workspace) + flags_bytes(s);
    auto rows_of = [&](int t) { return s.rows[static_cast<size_t>(t)]; };
    auto start_of = [&](int t) { return static_cast<size_t>(s.row_start[static_cast<size_t>(t)]); };
    // This member's rows to the member after it first: each member receives first from the
    // member before it, whose rows it multiplies first.
    if (rows_of(me))
      for (int j = 1; j < n; ++j) {
        const int t = (me + j) % n;
        push(ctx, t, gathered + start_of(me) * row_bytes, b.a,
             static_cast<size_t>(rows_of(me)) * row_bytes, flags, 1, side);
      }
    char* c = static_cast<char*>(b.c);
    fused_gemm(ctx.topology.device, main, rows_of(me), s.n, s.k, s.a_type, b.a, b.b,
               s.b_transposed, s.c_type, c + start_of(me) * c_row);
    for (int j = 1; j < n; ++j) {
      const int t = (me - j + n) % n;
      if (!rows_of(t)) continue;
      wait_flag(ctx, flags, t, 1, main);
      fused_gemm(ctx.topology.device, main, rows_of(t), s.n, s.k, s.a_type,
                 gathered + start_of(t) * row_bytes, b.b, s.b_transposed, s.c_type,
                 c + start_of(t) * c_row);
    }
    if (!b.gathered) return;
    char* out = static_cast<char*>(b.gathered);
    for (int t = 0; t < n; ++t)
      if (rows_of(t))
        SYMCOMM_CUDART(cudaMemcpyAsync(out + start_of(t) * row_bytes,
                                       t == me ? b.a : gathered + start_of(t) * row_bytes,
                                       static_cast<size_t>(rows_of(t)) * row_bytes,
                                       cudaMemcpyDeviceToDevice, main));
  }

  // The pieces an owner's block of `rows` rows of `n` columns goes in (the same on every
  // member), so that its push starts after the first piece's GEMM rather than the whole
  // block's: up to 4, each of at least 1024 rows and 4 Mi elements. On 2 x H200 two pieces
  // took GEMM + reduce-scatter at 4096^3 from 208 to 187 us; four left 8192^3 as it was
  // (906, 902 us) and slowed M=K=8192, N=1024 from 135 to 160 us (GEMMs of 1024 x 1024).
  static int64_t pieces_of(int64_t rows, int64_t n) {
    const int64_t by_rows = rows / 1024, by_size = rows * n / (int64_t{4} << 20);
    return std::max<int64_t>(1, std::min<int64_t>(4, std::min(by_rows, by_size)));
  }

  static void gemm_reduce_scatter(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                                  cudaStream_t main, Side& side) {
    const int n = ctx.team.size, me = ctx.me;
    const int64_t k = s.cols[static_cast<size_t>(me)];
    const size_t a_row = static_cast<size_t>(k) * fused_element_bytes(s.a_type);
    const size_t c_row = static_cast<size_t>(s.n);  // floats
    uint64_t* flags = static_cast<uint64_t*>(b.workspace);
    float* partial = reinterpret_cast<float*>(static_cast<char*>(b.workspace) + flags_bytes(s));
    float* slots = partial + static_cast<size_t>(s.m * s.n);
    const int64_t most = *std::max_element(s.rows.begin(), s.rows.end());
    const size_t stride = static_cast<size_t>(most * s.n);  // floats per member's slot
    auto rows_of = [&](int t) { return s.rows[static_cast<size_t>(t)]; };
    auto start_of = [&](int t) { return static_cast<size_t>(s.row_start[static_cast<size_t>(t)]); };
    const char* a = static_cast<const char*>(b.a);
    for (int j = 1; j < n; ++j) {
      const int t = (me + j) % n;  // the owner of these rows
      const int64_t rows = rows_of(t), pieces = pieces_of(rows, s.n);
      for (int64_t p = 0; p < pieces; ++p) {
        // Rows [r0, r1) of t's block; piece p sets t's flag of this member to p + 1.
        const int64_t r0 = rows * p / pieces, r1 = rows * (p + 1) / pieces;
        if (r0 == r1) continue;
        const size_t first = start_of(t) + static_cast<size_t>(r0);
        float* block = partial + first * c_row;
        fused_gemm(ctx.topology.device, main, r1 - r0, s.n, k, s.a_type, a + first * a_row, b.b,
                   s.b_transposed, symcommFloat32, block);
        follow(side, main, side.stream);
        push(ctx, t, slots + static_cast<size_t>(me) * stride + static_cast<size_t>(r0) * c_row,
             block, static_cast<size_t>((r1 - r0) * s.n) * sizeof(float), flags,
             static_cast<uint64_t>(p + 1), side);
      }
    }
    if (!rows_of(me)) return;
    fused_gemm(ctx.topology.device, main, rows_of(me), s.n, k, s.a_type, a + start_of(me) * a_row,
               b.b, s.b_transposed, symcommFloat32, slots + static_cast<size_t>(me) * stride);
    const uint64_t pieces = static_cast<uint64_t>(pieces_of(rows_of(me), s.n));
    for (int t = 0; t < n; ++t)
      if (t != me) wait_flag(ctx, flags, t, pieces, main);
    sum_blocks(slots, stride, n, static_cast<size_t>(rows_of(me) * s.n), s.c_type, b.c, main);
  }
};

const Registered<FusedImplementation, Pipelined> kRegistered(5);  // before sequential

}  // namespace

}  // namespace symcomm
