// The "copy" backend: transposes and halo exchanges as pack into the workspace, puts into
// the receivers' workspace (copy engines on GPUs, memcpy on the host), a team barrier, and
// unpack. Works in both memory spaces; the reference the other backends are checked against.
#include <algorithm>

#include "decomp/backend.h"
#include "decomp/halo.h"
#include "decomp/transpose.h"

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "copy",
    // After the direct ones, before the NCCL ones (bench/results/h200x4/decomp_497fdd2.jsonl).
    .preference = 50,
    .spaces = kDecompHostAndCuda,
    .load_store_peers = true,
    .nccl = false,
    .copies_wait_for_peers = false,
};

class CopyBackend final : public DecompBackend {
 public:
  CopyBackend() : DecompBackend(kDescriptor) {}

  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return 2 * static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    RmaBackend& b = ctx.rma.backend();
    const BarrierArgs barrier = ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to));
    char* send = t.workspace;
    char* recv = t.workspace + transpose_workspace(ctx, e) / 2;
    b.barrier(barrier, t.stream);  // every member is done with its receive area
    for (size_t k = 0; k < plan.members.size(); ++k) {
      const Box& box = plan.send[k];
      if (box.count() == 0) continue;
      b.copy_box(send + plan.send_off[k] * se, packed_layout(box), t.input, in_layout, box.lo,
                 box.hi, e, t.stream);
      b.put(peer_address(ctx, recv + plan.remote_off[k] * se, plan.members[k]),
            send + plan.send_off[k] * se, static_cast<size_t>(box.count()) * e, symcommEngineCe,
            t.stream);
    }
    b.barrier(barrier, t.stream);  // every block arrived
    unpack_all(b, plan, t, recv);
  }

  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return 4 * largest_halo_slab(ctx, axis, dim, halo, padding) * elem;
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
    if (plan.slab == 0) return;  // no halo along dim
    RmaBackend& b = ctx.rma.backend();
    // Slots: 0 my low slab, 1 my high slab, 2 what fills my low halo, 3 my high halo.
    char* slots[4] = {h.workspace, h.workspace + slot, h.workspace + 2 * slot,
                      h.workspace + 3 * slot};
    BarrierArgs barrier{};
    if (!plan.self) {
      barrier = ctx.rma.barrier_args(plan.over_rows ? ctx.col_team : ctx.row_team);
      b.barrier(barrier, h.stream);  // the neighbours' slots are free
    }
    // My high slab fills the low halo of the part above (its slot 2); my low slab the high
    // halo of the part below (its slot 3).
    const struct {
      const HaloSide& side;
      int mine, theirs;
    } sends[] = {{plan.high, 1, 2}, {plan.low, 0, 3}};
    for (const auto& s : sends) {
      if (s.side.neighbour < 0) continue;
      b.copy_box(slots[s.mine], packed_layout(s.side.send), h.buffer, layout, s.side.send.lo,
                 s.side.send.hi, e, h.stream);
      b.put(peer_address(ctx, slots[s.theirs], s.side.neighbour), slots[s.mine],
            static_cast<size_t>(s.side.send.count()) * e, symcommEngineCe, h.stream);
    }
    if (!plan.self) b.barrier(barrier, h.stream);  // every slab arrived
    const struct {
      const HaloSide& side;
      int slot;
    } recvs[] = {{plan.low, 2}, {plan.high, 3}};
    for (const auto& r : recvs)
      if (r.side.neighbour >= 0)
        b.copy_box(h.buffer, layout, slots[r.slot], packed_layout(r.side.recv), r.side.recv.lo,
                   r.side.recv.hi, e, h.stream);
  }

};

const Registered<DecompBackend, CopyBackend> kRegistered(kDescriptor.preference);

}  // namespace

}  // namespace symcomm
