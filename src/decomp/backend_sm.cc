// The "sm" backend: the sender's copy kernels write each block through the peer mapping
// (NVLink stores on GPUs, memcpy on the host): no local pack and no copy-engine put. Fewer
// steps than "copy" (one kernel for all peers instead of packs and puts), so it wins where
// per-peer messages are small and launch and copy-engine start-up costs dominate.
//
// Where each block lands (the same choice on every rank, by the contract in backend.h):
//   direct: the output is symmetric and the call is out of place: straight into the
//     member's output, at its place in the member's layout (halo and padding included), so
//     that nobody unpacks. Stores to a peer are posted, so this moves more per second than
//     the fused backend's loads from peers.
//   staged: otherwise, into the member's receive area (the workspace), packed at my block's
//     place, and each rank unpacks after the second barrier. In place, the members' inputs
//     are their outputs and are still being read: nothing may land there before the
//     barrier.
//
// Transpose, per call:
//   barrier (every destination is free: its owner finished with the previous call)
//   copies (BoxCopies) of my box for every other member (members in turn from the next one,
//   so that no receiver gets all senders' first blocks at once), and of my own block
//   straight from input to output (staged when in place)
//   barrier (every block has arrived, and every read of every input is done)
//   staged only: one launch unpacks every received block into the output
// The barriers and the copies are one launch on GPUs (copy_boxes_between_barriers): each
// block of the copy kernel waits for its receiver's arrival only.
// The own block skips the staging unless input and output overlap (in place), where it must
// wait until the input has been read completely.
//
// Halo exchange: the same pattern. Direct (the buffer is symmetric): each slab goes straight
// into the neighbour's halo, nothing to unpack. Staged: into the neighbour's receive slot,
// unpacked after the barrier. A dimension that is not split is filled from the rank's own
// buffer directly.
//
// What the shortcuts touch (docs/decomp.md, "What the shortcuts touch"): the direct paths
// store only into peers' symmetric buffers (heap memory, mapped from a peer of this node)
// and load only from this rank's own input; a non-symmetric output or halo buffer disables
// them (staged: the blocks go into the peers' workspaces, which are heap memory too).
#include "decomp/backend.h"

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "sm",
    // First: the fastest in every case with communication, 1.54-2.57x nccl
    // (bench/results/h200x4/decomp_497fdd2.jsonl).
    .preference = 10,
    .spaces = kDecompHostAndCuda,
    .load_store_peers = true,
    .nccl = false,
    .copies_wait_for_peers = true,
};

class SmBackend final : public DecompBackend {
 public:
  SmBackend() : DecompBackend(kDescriptor) {}

  // The receive area only: blocks go straight from the input to the receivers.
  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    RmaBackend& b = ctx.rma.backend();
    const BarrierArgs barrier = ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to));
    char* recv = t.workspace;
    const int n = static_cast<int>(plan.members.size()), me = plan.me;
    const bool direct = ctx.heap.contains(t.output) && !in_place_on_any_member(ctx, t, plan);
    BoxCopies copies(e);  // one launch writes every member's block at once
    for (int s = 1; s < n; ++s) {
      const size_t k = static_cast<size_t>((me + s) % n);
      const int member = plan.members[k];
      const Box& box = plan.send[k];
      if (direct)
        copies.add(peer_address(ctx, t.output, member),
                   pencil_layout(ctx.geometry.pencil(member, t.to, t.out.halo, t.out.padding)),
                   t.input, in_layout, box, member);
      else
        copies.add(peer_address(ctx, recv + plan.remote_off[k] * se, member), packed_layout(box),
                   t.input, in_layout, box, member);
    }
    const size_t self = static_cast<size_t>(me);
    if (in_place)
      copies.add(recv + plan.recv_off[self] * se, packed_layout(plan.send[self]), t.input,
                 in_layout, plan.send[self]);
    else
      copies.add(t.output, out_layout, t.input, in_layout, plan.send[self]);
    copies.run_between_barriers(b, barrier, t.stream);
    if (direct) return;  // every block is in its place
    for (int k = 0; k < n; ++k) {
      if (k == me && !in_place) continue;  // already in place
      const Box& box = plan.recv[static_cast<size_t>(k)];
      copies.add(t.output, out_layout, recv + plan.recv_off[static_cast<size_t>(k)] * se,
                 packed_layout(box), box);
    }
    copies.run(b, t.stream);
  }

  // Two slots: what fills my low halo, what fills my high halo.
  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return 2 * largest_halo_slab(ctx, axis, dim, halo, padding) * elem;
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
    if (plan.slab == 0) return;
    if (plan.self) return halo_from_self(ctx, h, plan);
    RmaBackend& b = ctx.rma.backend();
    char* slots[2] = {h.workspace, h.workspace + slot};  // fill my low, my high halo
    const bool direct = ctx.heap.contains(h.buffer);
    const BarrierArgs barrier = ctx.rma.barrier_args(halo_team(ctx, plan.over_rows));
    // My high slab fills the low halo of the part above (its slot 0); my low slab the high
    // halo of the part below (its slot 1).
    const struct {
      const HaloSide& side;
      int theirs;
    } sends[] = {{plan.high, 0}, {plan.low, 1}};
    BoxCopies copies(e);  // both slabs in one launch, and both halos in one
    for (const auto& s : sends) {
      const int m = s.side.neighbour;
      if (m < 0) continue;
      if (direct) {
        // Into the halo itself, through the neighbour's layout moved by the distance from my
        // slab to that halo (in the neighbour's coordinates; wrapping included).
        const HaloPlan theirs = plan_halo(ctx.geometry, m, h.axis, h.dim, h.halo, h.padding,
                                          h.periodic);
        const Box& halo = s.theirs == 0 ? theirs.low.recv : theirs.high.recv;
        const int64_t delta = halo.lo[h.dim] - s.side.send.lo[h.dim];
        const BoxLayout there = pencil_layout(ctx.geometry.pencil(m, h.axis, h.halo, h.padding));
        copies.add(peer_address(ctx, h.buffer, m), translated(there, h.dim, -delta), h.buffer,
                   layout, s.side.send, m);
      } else {
        copies.add(peer_address(ctx, slots[s.theirs], m), packed_layout(s.side.send), h.buffer,
                   layout, s.side.send, m);
      }
    }
    // After the first barrier: the neighbours' halos (direct) or slots are free. After the
    // second: every slab arrived.
    copies.run_between_barriers(b, barrier, h.stream);
    if (direct) return;  // in the halos already
    const struct {
      const HaloSide& side;
      int mine;
    } recvs[] = {{plan.low, 0}, {plan.high, 1}};
    for (const auto& r : recvs)
      if (r.side.neighbour >= 0)
        copies.add(h.buffer, layout, slots[r.mine], packed_layout(r.side.recv), r.side.recv);
    copies.run(b, h.stream);
  }
};

const Registered<DecompBackend, SmBackend> kRegistered(kDescriptor.preference);

}  // namespace

}  // namespace symcomm
