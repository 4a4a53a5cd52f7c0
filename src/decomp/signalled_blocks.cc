#include "decomp/signalled_blocks.h"

namespace symcomm {

size_t SignalledBlocksBackend::transpose_workspace(const DecompContext& ctx, size_t elem) const {
  return signal_words_bytes(largest_team(ctx.geometry)) +
         2 * static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
}

void SignalledBlocksBackend::transpose(const DecompContext& ctx, const TransposeCall& t) {
  const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
  RmaBackend& b = ctx.rma.backend();
  auto* words = reinterpret_cast<uint64_t*>(t.workspace);
  char* send = t.workspace + signal_words_bytes(largest_team(ctx.geometry));
  char* recv = send + static_cast<size_t>(staging_elements(ctx.geometry)) * e;
  const int n = static_cast<int>(plan.members.size()), me = plan.me;
  for (int k = 0; k < n; ++k)
    if (k != me && plan.recv[static_cast<size_t>(k)].count() > 0)
      b.signal(&words[k], 0, symcommSignalSet, t.stream);
  if (n > 1) b.barrier(ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to)), t.stream);
  for (int s = 1; s < n; ++s) {
    const size_t k = static_cast<size_t>((me + s) % n);
    const Box& box = plan.send[k];
    if (box.count() == 0) continue;  // the member expects no signal either
    send_block(ctx, plan.members[k], t.input, in_layout, box, send + plan.send_off[k] * se,
               recv + plan.remote_off[k] * se, &words[me], e, t.stream);
  }
  const size_t self = static_cast<size_t>(me);
  if (in_place)  // the input is read to the end before the first unpack below
    move_box(ctx, recv + plan.recv_off[self] * se, packed_layout(plan.send[self]), t.input,
             in_layout, plan.send[self], e, symcommEngineCe, t.stream);
  else
    move_box(ctx, t.output, out_layout, t.input, in_layout, plan.send[self], e,
             symcommEngineCe, t.stream);
  for (int s = 1; s < n; ++s) {
    const size_t k = static_cast<size_t>((me - s + n) % n);
    const Box& box = plan.recv[k];
    if (box.count() == 0) continue;
    b.wait(&words[k], symcommCmpGe, 1, t.stream);
    move_box(ctx, t.output, out_layout, recv + plan.recv_off[k] * se, packed_layout(box), box,
             e, symcommEngineCe, t.stream);
  }
  if (in_place)
    move_box(ctx, t.output, out_layout, recv + plan.recv_off[self] * se,
             packed_layout(plan.recv[self]), plan.recv[self], e, symcommEngineCe, t.stream);
}

size_t SignalledBlocksBackend::halo_workspace(const DecompContext& ctx, int axis, int dim,
                                              size_t elem, const int64_t* halo,
                                              const int64_t* padding) const {
  const size_t slab = largest_halo_slab(ctx, axis, dim, halo, padding);
  return slab == 0 ? 0 : signal_words_bytes(2) + 4 * slab * elem;
}

void SignalledBlocksBackend::halo(const DecompContext& ctx, const HaloCall& h) {
  const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
  if (plan.slab == 0) return;
  if (plan.self) return halo_from_self(ctx, h, plan);
  RmaBackend& b = ctx.rma.backend();
  auto* words = reinterpret_cast<uint64_t*>(h.workspace);  // 0: my low halo, 1: my high
  char* base = h.workspace + signal_words_bytes(2);
  char* slots[4] = {base, base + slot, base + 2 * slot, base + 3 * slot};
  if (plan.low.neighbour >= 0) b.signal(&words[0], 0, symcommSignalSet, h.stream);
  if (plan.high.neighbour >= 0) b.signal(&words[1], 0, symcommSignalSet, h.stream);
  b.barrier(ctx.rma.barrier_args(halo_team(ctx, plan.over_rows)), h.stream);
  // My high slab fills the low halo of the part above (its slot 2, word 0); my low slab
  // the high halo of the part below (its slot 3, word 1).
  const struct {
    const HaloSide& side;
    int mine, theirs;
  } sends[] = {{plan.high, 0, 2}, {plan.low, 1, 3}};
  for (const auto& s : sends)
    if (s.side.neighbour >= 0)
      send_block(ctx, s.side.neighbour, h.buffer, layout, s.side.send, slots[s.mine],
                 slots[s.theirs], &words[s.theirs - 2], e, h.stream);
  const struct {
    const HaloSide& side;
    int word;
  } recvs[] = {{plan.low, 0}, {plan.high, 1}};
  for (const auto& r : recvs) {
    if (r.side.neighbour < 0) continue;
    b.wait(&words[r.word], symcommCmpGe, 1, h.stream);
    move_box(ctx, h.buffer, layout, slots[2 + r.word], packed_layout(r.side.recv), r.side.recv,
             e, symcommEngineCe, h.stream);
  }
}

}  // namespace symcomm
