// The "sm" backend: the sender's copy kernels write each block straight into the receiver's
// staging area through the peer mapping (NVLink stores on GPUs, memcpy on the host): no
// local pack and no copy-engine put. A team barrier, then each rank unpacks locally. Fewer
// steps than "copy" (one kernel for all peers instead of packs and puts), so it wins
// where per-peer messages are small and launch and copy-engine start-up costs dominate.
//
// Transpose, per call:
//   barrier (every receive area is free: its owner finished unpacking the previous call)
//   one launch (BoxCopies) writes my box for every other member into its receive area, at
//   my block's place (members in turn from the next one, so that no receiver gets all
//   senders' first blocks at once), and my own block straight from input to output
//   (staged when in place)
//   barrier (every block has arrived, and every read of every input is done)
//   one launch unpacks every received block into the output
// The own block skips the staging unless input and output overlap (in place), where it must
// wait until the input has been read completely.
//
// Halo exchange: the same pattern, each slab written into the neighbour's receive slot by
// copy_box; a dimension that is not split is filled from the rank's own buffer directly.
#include "decomp/backend.h"

namespace symcomm {

namespace {

class SmBackend final : public DecompBackend {
 public:
  const char* name() const override { return "sm"; }

  bool supports(const DecompContext& ctx) const override { return all_peers_mapped(ctx); }

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
    b.barrier(barrier, t.stream);
    BoxCopies copies(e);  // one launch writes every member's block at once
    for (int s = 1; s < n; ++s) {
      const size_t k = static_cast<size_t>((me + s) % n);
      const Box& box = plan.send[k];
      char* there = peer_address(ctx, recv + plan.remote_off[k] * se, plan.members[k]);
      copies.add(there, packed_layout(box), t.input, in_layout, box);
    }
    const size_t self = static_cast<size_t>(me);
    if (in_place)
      copies.add(recv + plan.recv_off[self] * se, packed_layout(plan.send[self]), t.input,
                 in_layout, plan.send[self]);
    else
      copies.add(t.output, out_layout, t.input, in_layout, plan.send[self]);
    copies.run(b, t.stream);
    b.barrier(barrier, t.stream);
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
    const BarrierArgs barrier = ctx.rma.barrier_args(halo_team(ctx, plan.over_rows));
    b.barrier(barrier, h.stream);  // the neighbours' slots are free
    // My high slab fills the low halo of the part above (its slot 0); my low slab the high
    // halo of the part below (its slot 1).
    const struct {
      const HaloSide& side;
      int theirs;
    } sends[] = {{plan.high, 0}, {plan.low, 1}};
    BoxCopies copies(e);  // both slabs in one launch, and both halos in one
    for (const auto& s : sends)
      if (s.side.neighbour >= 0)
        copies.add(peer_address(ctx, slots[s.theirs], s.side.neighbour),
                   packed_layout(s.side.send), h.buffer, layout, s.side.send);
    copies.run(b, h.stream);
    b.barrier(barrier, h.stream);  // every slab arrived
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

}  // namespace

DecompBackend* make_sm_backend() {
  static SmBackend backend;
  return &backend;
}

}  // namespace symcomm
