// The fused implementation's GEMM + reduce-scatter (fused_gemm_rs.h). Workspace: the flags
// (flags_bytes), then n slots of the largest member's rows ([most, N] float32 each: slot t
// holds member t's partial product of this member's rows), then the kernel's scratch.
//
// A run: clear this member's flags; a team barrier (every member's earlier sums are done, so
// nobody still reads a slot this run overwrites); the scatter GEMM, group j the rows of owner
// (me + 1 + j) mod n into slot me of that owner (its memory, mapped here), this member's own
// rows last; one kernel that sets flag me on every owner; the stream waits for every member's
// flag here; the slots summed into C.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "fused/fused_gemm_rs.h"
#include "fused/scatter_gemm.h"
#include "fused/side_stream.h"
#include "fused/sum_blocks.h"
#include "rma/rma.h"

namespace symcomm {

namespace {

struct Owners {
  uint64_t* flag[SYMCOMM_FUSED_MAX_MEMBERS];  // this member's flag on each owner, mapped here
  int count;
};

// After the GEMM (stream order: its stores are done), thread t sets flag t to 1 with a
// release at system scope, after a fence that orders the GEMM's stores before it.
__global__ void __launch_bounds__(32) flag_owners_kernel(const __grid_constant__ Owners to) {
  pdl_begin();
  if (static_cast<int>(threadIdx.x) >= to.count) return;
  __threadfence_system();
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(to.flag[threadIdx.x]),
               "l"(uint64_t{1})
               : "memory");
}

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t most_rows(const FusedShape& s) { return *std::max_element(s.rows.begin(), s.rows.end()); }

// Floats of one slot.
size_t slot_floats(const FusedShape& s) { return static_cast<size_t>(most_rows(s) * s.n); }

const ScatterGemm& kernel() {
  std::string why;
  const ScatterGemm* gemm = scatter_gemm(&why);
  SYMCOMM_REQUIRE(gemm, symcommNotSupported, "%s", why.c_str());
  return *gemm;
}

}  // namespace

Verdict fused_gemm_rs_verdict(const FusedShape& s, const FusedContext& ctx) {
  std::string why;
  const ScatterGemm* gemm = scatter_gemm(&why);
  if (!gemm) return Verdict::no(why);
  for (size_t t = 0; t < s.cols.size(); ++t) {
    const Verdict v = gemm->can_run(s.n, s.cols[t], s.a_type);
    if (!v) return v;
    const int pe = ctx.team.world_of(static_cast<int>(t));
    if (!ctx.topology.accessible[static_cast<size_t>(pe)])
      return Verdict::no("its GEMM stores into every member's memory, and rank " +
                         std::to_string(pe) + " is not mapped here: " +
                         ctx.topology.why_inaccessible(pe));
    if (s.rows[t] >= (int64_t{1} << 31))
      return Verdict::no("its kernel takes blocks of fewer than 2^31 rows");
  }
  return Verdict::yes();
}

size_t fused_gemm_rs_workspace(const FusedShape& s) {
  std::string why;
  const ScatterGemm* gemm = scatter_gemm(&why);
  return flags_bytes(s) + aligned(s.rows.size() * slot_floats(s) * sizeof(float)) +
         (gemm ? gemm->scratch_bytes() : 0);
}

void fused_gemm_rs(const FusedShape& s, FusedContext& ctx, const FusedBuffers& b,
                   symcommStream_t stream) {
  const ScatterGemm& gemm = kernel();
  const int n = ctx.team.size, me = ctx.me;
  const cudaStream_t main = static_cast<cudaStream_t>(stream);
  const size_t stride = slot_floats(s);
  auto* flags = static_cast<uint64_t*>(b.workspace);
  char* const base = static_cast<char*>(b.workspace) + flags_bytes(s);
  float* const slots = reinterpret_cast<float*>(base);
  void* const scratch = base + aligned(static_cast<size_t>(n) * stride * sizeof(float));
  auto rows_of = [&](int t) { return s.rows[static_cast<size_t>(t)]; };
  // Where this member's partial of owner t's rows goes: slot me of t's slots.
  auto slot_on = [&](int t) {
    float* mine = slots + static_cast<size_t>(me) * stride;
    if (t == me) return mine;
    auto* p = static_cast<float*>(ctx.heap.peer_ptr(mine, ctx.team.world_of(t)));
    SYMCOMM_REQUIRE(p, symcommInternalError, "member %d's workspace is not mapped here", t);
    return p;
  };

  SYMCOMM_CUDART(cudaMemsetAsync(flags, 0, flags_bytes(s), main));
  team_barrier(ctx, stream);
  const int64_t k = s.cols[static_cast<size_t>(me)];
  ScatterGemmCall call{};
  call.n = s.n, call.k = k, call.in = s.a_type, call.b_transposed = s.b_transposed;
  call.a = b.a, call.b = b.b, call.scratch = scratch;
  Owners owners{};
  for (int j = 1; j <= n; ++j) {
    const int t = (me + j) % n;  // the member after this one first, this member last
    if (!rows_of(t)) continue;
    float* out = slot_on(t);
    if (k == 0) {  // no columns of A here: this member's partials are zeros
      SYMCOMM_CUDART(cudaMemsetAsync(out, 0, static_cast<size_t>(rows_of(t) * s.n) * 4, main));
    } else {
      call.a_row[call.groups] = s.row_start[static_cast<size_t>(t)];
      call.rows[call.groups] = rows_of(t);
      call.out[call.groups++] = out;
    }
    if (t != me) {
      auto* flag = static_cast<uint64_t*>(ctx.heap.peer_ptr(flags + me, ctx.team.world_of(t)));
      SYMCOMM_REQUIRE(flag, symcommInternalError, "member %d's flags are not mapped here", t);
      owners.flag[owners.count++] = flag;
    }
  }
  gemm.run(call, ctx.topology.device, main);
  if (owners.count) {
    launch_kernel(flag_owners_kernel, 1, 32, main, owners);
    SYMCOMM_CUDART(cudaGetLastError());
  }
  if (!rows_of(me)) return;
  for (int t = 0; t < n; ++t)
    if (t != me) ctx.rma.backend().wait(flags + t, symcommCmpGe, 1, main);
  sum_blocks(slots, stride, n, static_cast<size_t>(rows_of(me) * s.n), s.c_type, b.c, main);
}

const KernelLibrary kKernels(reinterpret_cast<const void*>(&flag_owners_kernel));

}  // namespace symcomm
