// The "ce" backend: transposes moved by the copy engines alone, no pack and no unpack
// kernel. Each block goes from this rank's input to its place in the member's memory as one
// strided copy (RmaBackend::copy_box_ce: a cudaMemcpy2D/3D), one member after another on the
// caller's stream: a copy engine moves about 386 GB/s per GPU that way in an all-to-all on
// H200, and less with copies to several peers at once (tools/probe/ce_a2a.cu). The SMs stay
// free for the caller's computation, except for the two barriers.
//
// Transpose, per call:
//   barrier                     every member is done with what it writes into below
//   for each other member, starting with the next one: my block for it ->
//     direct: its output, in its output layout (the output is symmetric, not in place)
//     staged: its workspace, packed at the place the plan gives my block
//   my own block: input -> output, or -> my workspace where the transpose is in place
//   barrier                     every block has landed (each member's copies come before its
//                               arrival on its stream)
//   staged: every block from my workspace -> my output
// Blocks whose layouts a copy engine cannot walk (axis-contiguous pencils, whose memory order
// differs between input and output) are copied by the backend's box kernel instead
// (move_box): those transposes use SMs.
//
// Copying the own block on a side stream, beside the copies to the members, gained nothing
// (1024^3 C32 on 4 x H200, commit 590b8d7, reverted): it stays on the caller's stream.
//
// Halo exchanges are ce_pipelined's: copy-engine puts with signals.
//
// What the shortcuts touch (docs/decomp.md): this rank's copy engine reads only this rank's
// input (the C API has checked that its GPU can access it: no pageable host memory) and
// writes peers' memory only inside the heap: their symmetric outputs (direct) or their
// receive areas. A non-symmetric output, or an in-place call, disables the direct path.
#include "decomp/backend.h"

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "ce",
    // After fused: faster than it only at 512^3 and 1024^3 on 1-D grids
    // (bench/results/h200x4/decomp_497fdd2.jsonl).
    .preference = 30,
    .spaces = kDecompHostAndCuda,
    .load_store_peers = true,
    .nccl = false,
    .copies_wait_for_peers = false,
};

class CeBackend final : public DecompBackend {
 public:
  CeBackend() : DecompBackend(kDescriptor) {}

  // The staged path's receive area.
  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const Geometry& g = ctx.geometry;
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    RmaBackend& b = ctx.rma.backend();
    const BarrierArgs barrier = ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to));
    const bool direct = ctx.heap.contains(t.output) && !in_place_on_any_member(ctx, t, plan);
    auto copy = [&](void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                    const Box& box) {
      if (!b.copy_box_ce(dst, dl, src, sl, box.lo, box.hi, e, t.stream))
        move_box(b, dst, dl, src, sl, box, e, symcommEngineCe, t.stream);
    };
    const int n = static_cast<int>(plan.members.size()), me = plan.me;
    if (n > 1) b.barrier(barrier, t.stream);  // a team of one has nobody to wait for
    for (int s = 1; s <= n; ++s) {
      const size_t k = static_cast<size_t>((me + s) % n);  // me last
      const Box& box = plan.send[k];
      if (box.count() == 0) continue;
      const int member = plan.members[k];
      if (direct) {
        void* there = member == ctx.rank ? t.output : peer_address(ctx, t.output, member);
        copy(there, pencil_layout(g.pencil(member, t.to, t.out.halo, t.out.padding)), t.input,
             in_layout, box);
      } else if (member == ctx.rank && !in_place) {
        copy(t.output, out_layout, t.input, in_layout, box);
      } else {
        char* area = t.workspace + plan.remote_off[k] * se;
        void* there = member == ctx.rank ? area : peer_address(ctx, area, member);
        copy(there, packed_layout(box), t.input, in_layout, box);
      }
    }
    if (n > 1) b.barrier(barrier, t.stream);
    if (direct) return;
    for (int k = 0; k < n; ++k) {
      const Box& box = plan.recv[static_cast<size_t>(k)];
      if (box.count() > 0 && (k != me || in_place))
        copy(t.output, out_layout, t.workspace + plan.recv_off[static_cast<size_t>(k)] * se,
             packed_layout(box), box);
    }
  }

  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return ce_pipelined_backend().halo_workspace(ctx, axis, dim, elem, halo, padding);
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    ce_pipelined_backend().halo(ctx, h);
  }
};

const Registered<DecompBackend, CeBackend> kRegistered(kDescriptor.preference);

}  // namespace

}  // namespace symcomm
