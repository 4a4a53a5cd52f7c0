// The fused implementation, in the cuda space: the communication inside the compute kernel.
//   all-gather + GEMM: each member pushes its rows of A into every member's workspace (copy
//     engines, the member after it first) and sets its flag there, while one GEMM kernel
//     (fused/waiting_gemm.h: CUTLASS's persistent WGMMA kernel) multiplies the gathered A:
//     a tile of this member's own rows starts at once, any other tile as soon as the flags
//     of the members whose rows it reads are set. One launch, tile by tile, where pipelined
//     waits on the stream for a member's whole block and runs a GEMM per member: the tiles
//     of all members are resident at once in a GEMM of one wave. Members anywhere (the
//     flags are the transports' put-signals).
//   transpose + accumulate: one kernel reads every member's block straight from the member's
//     X (its memory mapped here), transposes it through shared memory and adds it to out:
//     no all-to-all, no staging buffer, one pass over out's tiles per member. The members
//     are read in turn from the one after this member (this member's own block last), so
//     that the members do not all read the same member at once. Members on this node only.
//   GEMM + reduce-scatter: one grouped GEMM kernel whose epilogue stores each partial tile
//     straight into its owner's slot (fused_gemm_rs.h), then the owners sum their slots.
// Every run begins with a team barrier (after clearing this member's flags): every member's
// input is written and nobody still reads what the run overwrites. The transpose ends with
// one too: nobody changes X before every member has read it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "fused/convert.cuh"
#include "fused/fused.h"
#include "fused/fused_gemm_rs.h"
#include "fused/side_stream.h"
#include "fused/waiting_gemm.h"
#include "rma/rma.h"
#include "transport/transport.h"

namespace symcomm {

namespace {

using fused_detail::from_float;
using fused_detail::to_float;

constexpr int kTile = 64;         // a tile is kTile x kTile elements
constexpr int kThreadsX = 32;     // a block is kThreadsX x kThreadsY threads; each thread
constexpr int kThreadsY = 8;      // moves two neighbouring elements of a row at a time

// Where member `t`'s block of this member's columns is: block [w, wt] row-major (rows: this
// member's columns of X, columns: member t's), added transposed to out's rows first ..
// first + wt. `tiles_end`: the running count of tiles up to and including this member's.
struct TransposeSource {
  const void* block;
  int64_t wt;
  int64_t first;
  int64_t tiles_end;
};

struct TransposeSources {
  TransposeSource member[SYMCOMM_FUSED_MAX_MEMBERS];
  int count;
};

template <typename T>
struct alignas(2 * sizeof(T)) Pair {
  T x, y;
};

// out [N, w] row-major: out[(first + i) * w + j] += block[j * wt + i] for every member's
// block. kPairs: every row of every block and of out has an even length (and the bases are
// aligned to two elements), so each thread reads and writes two neighbours at once.
template <typename T, bool kPairs>
__global__ void __launch_bounds__(kThreadsX * kThreadsY)
    transpose_peers_kernel(const __grid_constant__ TransposeSources sources, int64_t w,
                           T* out) {
  pdl_begin();
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tiles_j = (w + kTile - 1) / kTile;
  const int64_t total = sources.member[sources.count - 1].tiles_end;
  int m = 0;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    while (b >= sources.member[m].tiles_end) ++m;  // tiles go up with b
    const TransposeSource& s = sources.member[m];
    const int64_t local = b - (m ? sources.member[m - 1].tiles_end : 0);
    const int64_t ti = local / tiles_j, tj = local % tiles_j;
    const T* block = static_cast<const T*>(s.block);
    const int64_t i0 = ti * kTile, j0 = tj * kTile;
    // Read block rows j0.., columns i0.. (along the rows: coalesced over the link).
    for (int r = threadIdx.y; r < kTile; r += kThreadsY) {
      const int64_t j = j0 + r, i = i0 + 2 * threadIdx.x;
      float v0 = 0.f, v1 = 0.f;
      if (j < w) {
        if (kPairs) {
          if (i < s.wt) {
            const Pair<T> p = *reinterpret_cast<const Pair<T>*>(block + j * s.wt + i);
            v0 = to_float(p.x), v1 = to_float(p.y);
          }
        } else {
          if (i < s.wt) v0 = to_float(block[j * s.wt + i]);
          if (i + 1 < s.wt) v1 = to_float(block[j * s.wt + i + 1]);
        }
      }
      tile[r][2 * threadIdx.x] = v0;
      tile[r][2 * threadIdx.x + 1] = v1;
    }
    __syncthreads();
    // out row first + i0 + r, columns j0 + 2x, + 1: block[j0 + 2x (+1)][i0 + r].
    for (int r = threadIdx.y; r < kTile; r += kThreadsY) {
      const int64_t i = i0 + r, j = j0 + 2 * threadIdx.x;
      if (i < s.wt) {
        T* o = out + (s.first + i) * w + j;
        if (kPairs) {
          if (j < w) {
            Pair<T> p = *reinterpret_cast<Pair<T>*>(o);
            p.x = from_float<T>(to_float(p.x) + tile[2 * threadIdx.x][r]);
            p.y = from_float<T>(to_float(p.y) + tile[2 * threadIdx.x + 1][r]);
            *reinterpret_cast<Pair<T>*>(o) = p;
          }
        } else {
          if (j < w) o[0] = from_float<T>(to_float(o[0]) + tile[2 * threadIdx.x][r]);
          if (j + 1 < w) o[1] = from_float<T>(to_float(o[1]) + tile[2 * threadIdx.x + 1][r]);
        }
      }
    }
    __syncthreads();
  }
}

// This member's rows of A into the gathered A of each member mapped here (its own
// included), by SM loads and stores: each thread reads 16 bytes once and writes them to
// every target. Each block then counts itself done (after a system fence: its stores are
// visible first); the last one sets this member's flag on every target.
struct PushTargets {
  uint4* dst[SYMCOMM_FUSED_MAX_MEMBERS];
  uint64_t* flag[SYMCOMM_FUSED_MAX_MEMBERS];
  int count;
};

__global__ void __launch_bounds__(256) push_rows_kernel(const __grid_constant__ PushTargets to,
                                                         const uint4* src, size_t vectors,
                                                         unsigned* done) {
  pdl_begin();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = src[i];
    for (int t = 0; t < to.count; ++t) to.dst[t][i] = v;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence_system();
  if (atomicAdd(done, 1u) != gridDim.x - 1) return;
  __threadfence_system();
  for (int t = 0; t < to.count; ++t)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(to.flag[t]), "l"(uint64_t{1})
                 : "memory");
}

int sm_count(int device) {
  int sms = 0;
  SYMCOMM_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

class Fused final : public FusedImplementation {
 public:
  const char* name() const override { return "fused"; }

  Verdict can_implement(const FusedShape& s, const FusedContext& ctx) const override {
    if (ctx.space != symcommSpaceCuda)
      return Verdict::no("it runs in the cuda memory space only (its kernels read peers' memory)");
    if (s.op == symcommFusedGemmReduceScatter) return fused_gemm_rs_verdict(s, ctx);
    if (s.op == symcommFusedAllGatherGemm) {
      std::string why;
      const WaitingGemm* gemm = waiting_gemm(&why);
      if (!gemm) return Verdict::no(why);
      if (s.m >= (int64_t{1} << 31))
        return Verdict::no("its flags name rows in 31 bits (M " + std::to_string(s.m) + ")");
      return gemm->can_run(s.m, s.n, s.k, s.a_type, s.c_type, s.b_transposed);
    }
    for (int t = 0; t < ctx.team.size; ++t) {
      const int pe = ctx.team.world_of(t);
      if (!ctx.topology.accessible[static_cast<size_t>(pe)])
        return Verdict::no("its kernel reads every member's memory, and rank " +
                           std::to_string(pe) + " is not mapped here: " +
                           ctx.topology.why_inaccessible(pe));
    }
    return Verdict::yes();
  }

  // All-gather + GEMM: where the GEMM's tiles are one wave (on 132 SMs: up to 1024 x 2048 of
  // C), so that the tiles of every member's rows are resident at once; longer GEMMs are
  // pipelined's, which hides the all-gather behind them. With 2 ranks on one H200 (MPS),
  // bfloat16: 35.7 us at 1024^3 against pipelined's 49.2 and sequential's 41.6; 123 against
  // pipelined's 94 at 2048^3, two waves (bench/results/h200x1/fused_n2_ac30b33.jsonl).
  // GEMM + reduce-scatter: not chosen automatically yet. With 2 ranks on one H200 (MPS) it
  // took 44.3 us at 1024^3 (sequential 43.4, pipelined 51.1), 98.8 at 2048^3 (pipelined 94.4)
  // and 478 at 4096^3 (pipelined 464), where the GPU is shared and "remote" stores are local;
  // the choice waits for a run on GPUs joined by NVLink.
  bool suits(const FusedShape& s, const FusedContext& ctx) const override {
    if (s.op == symcommFusedGemmReduceScatter) return false;
    if (s.op != symcommFusedAllGatherGemm) return true;
    std::string why;
    const WaitingGemm* gemm = waiting_gemm(&why);
    return gemm && gemm->tiles(s.m, s.n) <= sm_count(ctx.topology.device);
  }

  size_t workspace_bytes(const FusedShape& s, const FusedContext&) const override {
    if (s.op == symcommFusedAllGatherGemm)  // the flags, the gathered A
      return flags_bytes(s) + static_cast<size_t>(s.m * s.k) * fused_element_bytes(s.a_type);
    if (s.op == symcommFusedGemmReduceScatter) return fused_gemm_rs_workspace(s);
    return 0;
  }

  void run(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
           symcommStream_t stream) const override {
    DeviceScope scope(ctx.topology.device);
    if (s.op == symcommFusedAllGatherGemm) return all_gather_gemm(s, ctx, b, stream);
    if (s.op == symcommFusedGemmReduceScatter) return fused_gemm_rs(s, ctx, b, stream);
    transpose_accumulate(s, ctx, b, stream);
  }

 private:
  static void all_gather_gemm(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                              symcommStream_t stream) {
    std::string why;
    const WaitingGemm* gemm = waiting_gemm(&why);
    SYMCOMM_REQUIRE(gemm, symcommNotSupported, "%s", why.c_str());
    const int n = ctx.team.size, me = ctx.me;
    const size_t row_bytes = static_cast<size_t>(s.k) * fused_element_bytes(s.a_type);
    uint64_t* flags = static_cast<uint64_t*>(b.workspace);
    char* gathered = static_cast<char*>(b.workspace) + flags_bytes(s);
    auto rows_of = [&](int t) { return static_cast<size_t>(s.rows[static_cast<size_t>(t)]); };
    auto start_of = [&](int t) { return static_cast<size_t>(s.row_start[static_cast<size_t>(t)]); };
    const cudaStream_t main = static_cast<cudaStream_t>(stream);
    Side& side = side_of(ctx.topology.device);
    std::lock_guard<std::mutex> lock(side.mutex);
    SYMCOMM_CUDART(cudaMemsetAsync(flags, 0, flags_bytes(s), main));
    team_barrier(ctx, stream);
    char* mine = gathered + start_of(me) * row_bytes;
    const size_t bytes = rows_of(me) * row_bytes;
    unsigned push_blocks = 0;
    if (bytes) {
      follow(side, main, side.stream);
      push_blocks = push(ctx, b.a, mine, bytes, flags, n, side.stream);
    }
    WaitingGemmCall call{};
    call.m = s.m, call.n = s.n, call.k = s.k;
    call.in = s.a_type, call.out = s.c_type, call.b_transposed = s.b_transposed;
    call.a = gathered, call.b = b.b, call.c = b.c;
    call.arrival.flags = flags;
    call.arrival.members = n;
    call.arrival.me = -1;  // this member's rows land with the pushes (push())
    for (int t = 0; t <= n; ++t)
      call.arrival.row_start[t] = static_cast<int32_t>(t < n ? start_of(t) : s.m);
    call.arrival.comm = ctx.rma.device_comm(ctx.team_id);
    // The GEMM's tiles wait for the push kernel, which must find SMs: the GEMM's persistent
    // grid leaves it as many (else, with every SM taken by CTAs that wait, both ranks hang).
    if (push_blocks)
      call.max_ctas = std::max(1, sm_count(ctx.topology.device) - static_cast<int>(push_blocks));
    gemm->run(call, ctx.topology.device, main);
    if (bytes) follow(side, side.stream, main);  // the pushes read A no longer
    if (b.gathered)
      SYMCOMM_CUDART(cudaMemcpyAsync(b.gathered, gathered, static_cast<size_t>(s.m) * row_bytes,
                                     cudaMemcpyDeviceToDevice, main));
  }

  // This member's `bytes` of A (`a`) to `mine` in every member's gathered A, and its flag
  // there set to 1 after them, on `side`: one kernel of SM stores for the members mapped
  // here (this member included: a latency of a few microseconds where a copy engine's is
  // tens, beside a GEMM of one wave that leaves SMs free), the transports' put-signals for
  // the others. The kernel's block count is in the workspace, after the flags. The GEMM
  // leaves the kernel its SMs (max_ctas).
  // Returns the kernel's blocks (0: no kernel).
  static unsigned push(FusedContext& ctx, const void* a, char* mine, size_t bytes,
                       uint64_t* flags, int n, cudaStream_t side) {
    const int me = ctx.me;
    PushTargets to{};
    const bool vectors = bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(mine) % 16 == 0;
    for (int j = 0; j < n; ++j) {
      const int t = (me + j) % n;  // this member first, then the member after it
      const int pe = ctx.team.world_of(t);
      char* dst = static_cast<char*>(ctx.heap.peer_ptr(mine, pe));
      uint64_t* flag = static_cast<uint64_t*>(ctx.heap.peer_ptr(flags + me, pe));
      if (vectors && dst && flag) {
        to.dst[to.count] = reinterpret_cast<uint4*>(dst);
        to.flag[to.count++] = flag;
        continue;
      }
      Transport& tr = member_transport(ctx, t);
      tr.put_signal(pe, mine, a, bytes, flags + me, 1, symcommSignalSet,
                    tr.load_store() ? symcommEngineCe : symcommEngineAuto, side);
    }
    if (!to.count) return 0;
    const size_t count = bytes / 16;
    const unsigned blocks =
        static_cast<unsigned>(std::clamp<size_t>(count / 2048, 1, kPushBlocks));
    launch_kernel(push_rows_kernel, blocks, 256, side, to, static_cast<const uint4*>(a), count,
                  reinterpret_cast<unsigned*>(flags + n));
    SYMCOMM_CUDART(cudaGetLastError());
    return blocks;
  }
  static constexpr size_t kPushBlocks = 32;

  static void transpose_accumulate(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                                   symcommStream_t stream) {
    const size_t me = static_cast<size_t>(ctx.me), elem = fused_element_bytes(s.a_type);
    const int64_t w = s.cols[me];
    TransposeSources sources{};
    bool pairs = w % 2 == 0 && reinterpret_cast<uintptr_t>(b.c) % (2 * elem) == 0;
    int64_t tiles = 0;
    const int64_t tiles_j = (w + kTile - 1) / kTile;
    for (int k = 1; k <= ctx.team.size && w; ++k) {  // the member after this one first
      const int t = (ctx.me + k) % ctx.team.size;
      const int64_t wt = s.cols[static_cast<size_t>(t)];
      if (!wt) continue;
      const char* x = static_cast<const char*>(ctx.heap.peer_ptr(b.a, ctx.team.world_of(t)));
      SYMCOMM_REQUIRE(x, symcommInternalError, "member %d's X is not mapped here", t);
      const char* block = x + static_cast<size_t>(s.col_start[me] * wt) * elem;
      pairs = pairs && wt % 2 == 0 && reinterpret_cast<uintptr_t>(block) % (2 * elem) == 0;
      tiles += (wt + kTile - 1) / kTile * tiles_j;
      sources.member[sources.count++] =
          TransposeSource{block, wt, s.col_start[static_cast<size_t>(t)], tiles};
    }
    team_barrier(ctx, stream);  // every member's X is written
    if (tiles) {
      const int64_t most = 8 * int64_t{sm_count(ctx.topology.device)};
      const unsigned grid = static_cast<unsigned>(std::min(tiles, most));
      const cudaStream_t st = static_cast<cudaStream_t>(stream);
      if (s.a_type == symcommFloat32) launch<float>(pairs, grid, st, sources, w, b.c);
      else if (s.a_type == symcommFloat16) launch<__half>(pairs, grid, st, sources, w, b.c);
      else launch<__nv_bfloat16>(pairs, grid, st, sources, w, b.c);
    }
    team_barrier(ctx, stream);  // nobody changes X before every member read it
  }

  template <typename T>
  static void launch(bool pairs, unsigned grid, cudaStream_t stream,
                     const TransposeSources& sources, int64_t w, void* out) {
    const dim3 block(kThreadsX, kThreadsY);
    if (pairs)
      launch_kernel(transpose_peers_kernel<T, true>, grid, block, stream, sources, w,
                    static_cast<T*>(out));
    else
      launch_kernel(transpose_peers_kernel<T, false>, grid, block, stream, sources, w,
                    static_cast<T*>(out));
    SYMCOMM_CUDART(cudaGetLastError());
  }
};

const Registered<FusedImplementation, Fused> kRegistered(4);  // before pipelined and sequential
const KernelLibrary kKernels(reinterpret_cast<const void*>(&transpose_peers_kernel<float, true>));

}  // namespace

}  // namespace symcomm
