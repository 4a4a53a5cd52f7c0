// The "fused" backend: no pack and no unpack. After a barrier (every input is ready), each
// rank's copy kernels read every member's block straight from that member's pencil through
// the peer mapping and write it into the final layout of this rank's output; a second
// barrier keeps every rank from changing its input before the others have read it.
//
// Where each member's pencil is read (the same choice on every rank, by the contract in
// backend.h):
//   direct: the input is symmetric (ctx.heap.contains(input)): from the member's input
//     itself, laid out as the member's pencil with this call's input halo and padding;
//   staged: otherwise (the input is not reachable from the peers): every rank first copies
//     its owned pencil into the first half of its workspace, compact (no halo, no padding;
//     one linear copy when the input has neither), and the members read that copy.
// Where this rank writes:
//   straight into the output, unless the transpose is in place and direct (the members are
//     still reading this rank's input, which is its output): then into the second half of
//     the workspace, unpacked into the output after the second barrier.
// All members' blocks move in one launch (BoxCopies), so that every peer is read at once;
// on GPUs the two barriers are part of it (RmaBackend::copy_boxes_between_barriers).
//
// Halo exchange, likewise: after a barrier each rank reads its neighbours' slabs straight
// from their buffers (a symmetric buffer) into its halos, through a layout translated along
// the exchanged dimension; a second barrier before anyone changes its buffer. A buffer that
// is not symmetric is staged: each rank packs its two slabs into its workspace, and the
// neighbours read them from there.
//
// What the shortcuts touch (docs/decomp.md): loads from peers only inside the heap (their
// symmetric inputs or buffers, or their workspaces when staged), stores only into this
// rank's own output or buffer. A non-symmetric input or halo buffer disables the direct
// reads: peers cannot address it.
#include "decomp/backend.h"

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "fused",
    // After sm: 4-11% slower (bench/results/h200x4/decomp_497fdd2.jsonl).
    .preference = 20,
    .spaces = kDecompHostAndCuda,
    .load_store_peers = true,
    .nccl = false,
    .copies_wait_for_peers = true,
};

class FusedBackend final : public DecompBackend {
 public:
  FusedBackend() : DecompBackend(kDescriptor) {}

  // Half one: the staged copy of the input; half two: blocks landing for an in-place call.
  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return 2 * static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const Geometry& g = ctx.geometry;
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    RmaBackend& b = ctx.rma.backend();
    const BarrierArgs barrier = ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to));
    const bool direct = ctx.heap.contains(t.input);
    const bool land = direct && in_place;
    char* staged = t.workspace;
    char* landing = t.workspace + transpose_workspace(ctx, e) / 2;
    if (!direct) {
      Box owned;
      for (int a = 0; a < 3; ++a) {
        owned.lo[a] = t.in.lo[a];
        owned.hi[a] = t.in.hi[a];
      }
      move_box(b, staged, pencil_layout(g.pencil(ctx.rank, t.from, nullptr, nullptr)), t.input,
               pencil_layout(t.in), owned, e, symcommEngineAuto, t.stream);
    }
    const int n = static_cast<int>(plan.members.size()), me = plan.me;
    // One launch reads every member's block at once (this rank first, then the next members
    // in turn, the order of the batch), between two barriers: after the first, every
    // member's pencil is readable (on GPUs, each copy waits for its member's arrival only);
    // after the second, every member has read what it needs.
    BoxCopies copies(e);
    for (int s = 0; s < n; ++s) {
      const size_t k = static_cast<size_t>((me + s) % n);
      const int member = plan.members[k];
      const Box& box = plan.recv[k];
      const char* src = direct ? static_cast<const char*>(t.input) : staged;
      const int peer = member != ctx.rank ? member : -1;
      if (peer >= 0) src = peer_address(ctx, src, member);
      const BoxLayout src_layout = pencil_layout(
          direct ? g.pencil(member, t.from, t.in.halo, t.in.padding)
                 : g.pencil(member, t.from, nullptr, nullptr));
      if (land)
        copies.add(landing + plan.recv_off[k] * se, packed_layout(box), src, src_layout, box, peer);
      else
        copies.add(t.output, out_layout, src, src_layout, box, peer);
    }
    copies.run_between_barriers(b, barrier, t.stream);
    if (land)
      unpack_all(b, plan, t, landing);
  }

  // Two slots: my low and my high slab, packed, where the buffer is not symmetric.
  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return 2 * largest_halo_slab(ctx, axis, dim, halo, padding) * elem;
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    const Geometry& g = ctx.geometry;
    const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
    if (plan.slab == 0) return;
    if (plan.self) return halo_from_self(ctx, h, plan);
    RmaBackend& b = ctx.rma.backend();
    const bool direct = ctx.heap.contains(h.buffer);
    char* slots[2] = {h.workspace, h.workspace + slot};  // my low slab, my high slab
    if (!direct) {
      move_box(b, slots[0], packed_layout(plan.low.send), h.buffer, layout, plan.low.send, e,
               symcommEngineAuto, h.stream);
      move_box(b, slots[1], packed_layout(plan.high.send), h.buffer, layout, plan.high.send, e,
               symcommEngineAuto, h.stream);
    }
    const BarrierArgs barrier = ctx.rma.barrier_args(halo_team(ctx, plan.over_rows));
    // My low halo is the high slab of the part below, my high halo the low slab of the part
    // above; each is read through the neighbour's layout moved by the distance between the
    // slab (in the neighbour's coordinates) and my halo (wrapping included).
    const struct {
      const HaloSide& side;
      bool their_high;
    } sides[] = {{plan.low, true}, {plan.high, false}};
    BoxCopies copies(e);  // both halos in one launch
    for (const auto& s : sides) {
      const int m = s.side.neighbour;
      if (m < 0) continue;
      const HaloPlan theirs = plan_halo(g, m, h.axis, h.dim, h.halo, h.padding, h.periodic);
      const Box& slab = s.their_high ? theirs.high.send : theirs.low.send;
      const int64_t delta = s.side.recv.lo[h.dim] - slab.lo[h.dim];
      const char* src = direct ? static_cast<const char*>(h.buffer) : slots[s.their_high ? 1 : 0];
      const BoxLayout src_layout =
          direct ? pencil_layout(g.pencil(m, h.axis, h.halo, h.padding)) : packed_layout(slab);
      copies.add(h.buffer, layout, peer_address(ctx, src, m), translated(src_layout, h.dim, delta),
                 s.side.recv, m);
    }
    // After the first barrier every slab is readable; after the second the neighbours have
    // read mine.
    copies.run_between_barriers(b, barrier, h.stream);
  }
};

const Registered<DecompBackend, FusedBackend> kRegistered(kDescriptor.preference);

}  // namespace

}  // namespace symcomm
