// The "nccl" backend: the plans, boxes and workspace offsets of "copy" (so results are the
// same bytes), with NCCL moving the packed blocks: pack every outgoing box into the send half
// of the workspace, grouped ncclSend/ncclRecv with the members of the row or column (over the
// communicator's NCCL communicators, nccl/nccl_comms.h, made when the decomposition is
// created), unpack every incoming box. A rank's own block is a local copy. Halo exchanges
// likewise, with the two neighbours. NCCL orders the exchange itself: no team barrier. GPUs
// only; the baseline the other backends are measured against.
#include "decomp/backend.h"
#include "decomp/halo.h"
#include "decomp/transpose.h"
#include "nccl/nccl_comms.h"
#include "nccl/nccl_lib.h"

#ifdef SYMCOMM_HAVE_NCCL
#include <algorithm>
#endif

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "nccl",
    .preference = 70,  // last: the baseline of bench/results/h200x4/decomp_497fdd2.jsonl
    .spaces = decomp_space_bit(symcommSpaceCuda),
    .load_store_peers = false,
    .nccl = true,
    .copies_wait_for_peers = false,
};

#ifdef SYMCOMM_HAVE_NCCL

class NcclBackend final : public DecompBackend {
 public:
  NcclBackend() : DecompBackend(kDescriptor) {}

  void prepare(const DecompContext& ctx) override {
    // Rows first, then columns, on every rank: no member waits for one that makes another.
    for (symcommTeam_t id : {ctx.row_team, ctx.col_team}) {
      const Team& team = ctx.rma.teams().get(id);
      if (team.size > 1) ctx.nccl->prepare(id, team, nullptr);
    }
  }

  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return 2 * static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    RmaBackend& b = ctx.rma.backend();
    Copies& c = ctx.copies;
    const symcommTeam_t id = transpose_team(ctx, t.from, t.to);
    const Team& team = ctx.rma.teams().get(id);
    char* send = t.workspace;
    char* recv = t.workspace + transpose_workspace(ctx, e) / 2;
    const size_t me = static_cast<size_t>(plan.me);
    for (size_t k = 0; k < plan.members.size(); ++k) {
      const Box& box = plan.send[k];
      if (box.count() == 0) continue;
      c.copy_box(send + plan.send_off[k] * se, packed_layout(box), t.input, in_layout, box.lo,
                 box.hi, e, t.stream);
    }
    if (plan.send[me].count() > 0)  // my own block, where copy's put to myself puts it
      b.put(recv + plan.remote_off[me] * se, send + plan.send_off[me] * se,
            static_cast<size_t>(plan.send[me].count()) * e, symcommEngineCe, t.stream);
    if (team.size > 1)  // every member calls (the first use makes the communicator)
      ctx.nccl->run(id, team, t.stream, [&](const NcclLib& lib, ncclComm_t comm) {
        nccl_group(lib, [&] {
          for (size_t k = 0; k < plan.members.size(); ++k) {
            if (k == me) continue;
            const int peer = member_index(team, plan.members[k]);
            if (const int64_t n = plan.send[k].count(); n > 0)
              SYMCOMM_NCCL(lib, ncclSend(send + plan.send_off[k] * se, static_cast<size_t>(n) * e,
                                         ncclUint8, peer, comm, t.stream));
            if (const int64_t n = plan.recv[k].count(); n > 0)
              SYMCOMM_NCCL(lib, ncclRecv(recv + plan.recv_off[k] * se, static_cast<size_t>(n) * e,
                                         ncclUint8, peer, comm, t.stream));
          }
        });
      });
    unpack_all(ctx, plan, t, recv);
  }

  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    return 4 * largest_halo_slab(ctx, axis, dim, halo, padding) * elem;
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
    if (plan.slab == 0) return;  // no halo along dim
    RmaBackend& b = ctx.rma.backend();
    Copies& c = ctx.copies;
    // Slots as copy's: 0 my low slab, 1 my high slab, 2 what fills my low halo, 3 my high halo.
    char* slots[4] = {h.workspace, h.workspace + slot, h.workspace + 2 * slot,
                      h.workspace + 3 * slot};
    // My high slab fills the low halo of the part above (its slot 2); my low slab the high
    // halo of the part below (its slot 3). Sent in this order, and received low halo first:
    // with two parts both neighbours are one rank, and NCCL matches in posting order.
    const struct {
      const HaloSide& side;
      int mine, theirs;
    } sends[] = {{plan.high, 1, 2}, {plan.low, 0, 3}};
    const struct {
      const HaloSide& side;
      int slot;
    } recvs[] = {{plan.low, 2}, {plan.high, 3}};
    for (const auto& s : sends)
      if (s.side.neighbour >= 0)
        c.copy_box(slots[s.mine], packed_layout(s.side.send), h.buffer, layout, s.side.send.lo,
                   s.side.send.hi, e, h.stream);
    if (plan.self) {  // not split: both sides are this rank
      for (const auto& s : sends)
        if (s.side.neighbour >= 0)
          b.put(slots[s.theirs], slots[s.mine], static_cast<size_t>(s.side.send.count()) * e,
                symcommEngineCe, h.stream);
    } else {
      const symcommTeam_t id = plan.over_rows ? ctx.col_team : ctx.row_team;
      const Team& team = ctx.rma.teams().get(id);
      ctx.nccl->run(id, team, h.stream, [&](const NcclLib& lib, ncclComm_t comm) {
        nccl_group(lib, [&] {
          for (const auto& s : sends)
            if (s.side.neighbour >= 0 && s.side.send.count() > 0)
              SYMCOMM_NCCL(lib, ncclSend(slots[s.mine],
                                         static_cast<size_t>(s.side.send.count()) * e, ncclUint8,
                                         member_index(team, s.side.neighbour), comm, h.stream));
          for (const auto& r : recvs)
            if (r.side.neighbour >= 0 && r.side.recv.count() > 0)
              SYMCOMM_NCCL(lib, ncclRecv(slots[r.slot],
                                         static_cast<size_t>(r.side.recv.count()) * e, ncclUint8,
                                         member_index(team, r.side.neighbour), comm, h.stream));
        });
      });
    }
    for (const auto& r : recvs)
      if (r.side.neighbour >= 0)
        c.copy_box(h.buffer, layout, slots[r.slot], packed_layout(r.side.recv), r.side.recv.lo,
                   r.side.recv.hi, e, h.stream);
  }
};

#else  // !SYMCOMM_HAVE_NCCL: registered, so that asking for it says why it cannot run

class NcclBackend final : public DecompBackend {
 public:
  NcclBackend() : DecompBackend(kDescriptor) {}
  size_t transpose_workspace(const DecompContext&, size_t) const override { return 0; }
  void transpose(const DecompContext&, const TransposeCall&) override { unavailable(); }
  size_t halo_workspace(const DecompContext&, int, int, size_t, const int64_t*,
                        const int64_t*) const override {
    return 0;
  }
  void halo(const DecompContext&, const HaloCall&) override { unavailable(); }

 private:
  [[noreturn]] static void unavailable() {
    SYMCOMM_THROW(symcommNotSupported, "%s", nccl_unavailable_reason().c_str());
  }
};

#endif

const Registered<DecompBackend, NcclBackend> kRegistered(kDescriptor.preference);

}  // namespace

DecompBackend& nccl_backend() {
  static DecompBackend& backend = *Registry<DecompBackend>::instance().find(kDescriptor.name);
  return backend;  // looked up once: every call that delegates to this backend comes here
}

}  // namespace symcomm
