// The "ce_pipelined" backend: per member, pack its block, put it with the copy engines into
// the member's receive area, and signal the member (a put-signal); each rank unpacks a
// member's block as soon as that member's signal has arrived, so the unpack of early blocks
// overlaps the transfers still coming in from later senders. No barrier at the end.
//
// Transpose, per call:
//   reset this rank's signal words (one per member it receives from) to 0
//   barrier (receive areas are free, every rank's words are reset)
//   for each other member, starting with the next one: pack (skipped where the block is a
//     contiguous run of the input: the put reads the input), CE put, signal SET 1
//   my own block: straight from input to output (shortcut; staged when in place)
//   for each other member, starting with the previous one (the first to have sent to me):
//     wait until its word >= 1, unpack (a linear copy where the block is a contiguous run of
//     the output)
//
// The signal words, and why they are reset rather than counted. The words live at the
// start of the symmetric workspace: word k of a rank is written only by member k of the
// team of the call. A monotonic counter (call i waits for >= i) would need the expected
// value i on the host, and a CUDA graph bakes the value of the call that was captured into
// every replay: from the second replay on, the wait would pass at once on the previous
// replay's count. The workspace is also the caller's memory, which may hold anything before
// the first call (or another backend's data, or a halo exchange's, between calls). So each
// call sets its words to 0 itself, in stream order, *before* the entry barrier, and senders
// set them to 1 only *after* it: every value a call waits on is the same on every call and
// every replay (0 then 1), and no sender's SET can overtake the reset (it needs this rank's
// arrival at the barrier, which follows the reset on this rank's stream). A word is read
// again only after the next call's reset; every signal of a call is waited for in that
// call, so none is left in flight. On GPUs the reset and the signals are stream memory
// operations (cuStreamWriteValue64, no SM); the wait is the RMA backend's wait.
//
// Halo exchange: the same with two words (what fills my low halo, my high halo): reset,
// barrier, pack + CE put + signal to each neighbour, wait + unpack per side. A dimension
// that is not split is filled from the rank's own buffer directly.
//
// What the shortcuts touch (docs/decomp.md): a skipped pack makes the copy engine read this
// rank's input or halo buffer itself (memory its GPU can access: checked by the C API);
// every put writes a peer's workspace (heap), never a peer's buffer, so no rule about the
// buffers' kind applies. A block that is not one contiguous run of the input is packed.
#include <algorithm>

#include "decomp/backend.h"

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "ce_pipelined",
    // After ce, which beat it everywhere (bench/results/h200x4/decomp_497fdd2.jsonl).
    .preference = 40,
    .spaces = kDecompHostAndCuda,
    .load_store_peers = true,
    .nccl = false,
    .copies_wait_for_peers = false,
};

class CePipelinedBackend final : public DecompBackend {
 public:
  CePipelinedBackend() : DecompBackend(kDescriptor) {}

  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return signal_words_bytes(largest_team(ctx.geometry)) +
           2 * static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
    const auto& [plan, e, se, in_layout, out_layout, in_place] = TransposeFrame(ctx, t);
    RmaBackend& b = ctx.rma.backend();
    Copies& c = ctx.copies;
    const BarrierArgs barrier = ctx.rma.barrier_args(transpose_team(ctx, t.from, t.to));
    auto* words = reinterpret_cast<uint64_t*>(t.workspace);
    char* send = t.workspace + signal_words_bytes(largest_team(ctx.geometry));
    char* recv = send + static_cast<size_t>(staging_elements(ctx.geometry)) * e;
    const int n = static_cast<int>(plan.members.size()), me = plan.me;
    for (int k = 0; k < n; ++k)
      if (k != me && plan.recv[static_cast<size_t>(k)].count() > 0)
        b.signal(&words[k], 0, symcommSignalSet, t.stream);
    b.barrier(barrier, t.stream);
    for (int s = 1; s < n; ++s) {
      const size_t k = static_cast<size_t>((me + s) % n);
      const Box& box = plan.send[k];
      if (box.count() == 0) continue;  // the member expects no signal either
      const char* block = send + plan.send_off[k] * se;
      if (packed_run(box, in_layout))
        block = static_cast<const char*>(t.input) +
                in_layout.offset(box.lo[0], box.lo[1], box.lo[2]) * se;
      else
        c.copy_box(send + plan.send_off[k] * se, packed_layout(box), t.input, in_layout, box.lo,
                   box.hi, e, t.stream);
      const int member = plan.members[k];
      b.put(peer_address(ctx, recv + plan.remote_off[k] * se, member), block,
            static_cast<size_t>(box.count()) * e, symcommEngineCe, t.stream);
      b.signal(reinterpret_cast<uint64_t*>(peer_address(ctx, &words[me], member)), 1,
               symcommSignalSet, t.stream);
    }
    const size_t self = static_cast<size_t>(me);
    if (in_place)  // the input is read to the end before the first unpack below
      move_box(ctx, recv + plan.recv_off[self] * se, packed_layout(plan.send[self]), t.input,
               in_layout, plan.send[self], e, symcommEngineCe, t.stream);
    else
      move_box(ctx, t.output, out_layout, t.input, in_layout, plan.send[self], e, symcommEngineCe,
               t.stream);
    for (int s = 1; s < n; ++s) {
      const size_t k = static_cast<size_t>((me - s + n) % n);
      const Box& box = plan.recv[k];
      if (box.count() == 0) continue;
      b.wait(&words[k], symcommCmpGe, 1, t.stream);
      move_box(ctx, t.output, out_layout, recv + plan.recv_off[k] * se, packed_layout(box), box, e,
               symcommEngineCe, t.stream);
    }
    if (in_place)
      move_box(ctx, t.output, out_layout, recv + plan.recv_off[self] * se,
               packed_layout(plan.recv[self]), plan.recv[self], e, symcommEngineCe, t.stream);
  }

  // Two words, then four slots: my high slab, my low slab (packed, to send), what fills my
  // low halo, what fills my high halo.
  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override {
    const size_t slab = largest_halo_slab(ctx, axis, dim, halo, padding);
    return slab == 0 ? 0 : signal_words_bytes(2) + 4 * slab * elem;
  }

  void halo(const DecompContext& ctx, const HaloCall& h) override {
    const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
    if (plan.slab == 0) return;
    if (plan.self) return halo_from_self(ctx, h, plan);
    RmaBackend& b = ctx.rma.backend();
    Copies& c = ctx.copies;
    auto* words = reinterpret_cast<uint64_t*>(h.workspace);  // 0: my low halo, 1: my high
    char* base = h.workspace + signal_words_bytes(2);
    char* slots[4] = {base, base + slot, base + 2 * slot, base + 3 * slot};
    if (plan.low.neighbour >= 0) b.signal(&words[0], 0, symcommSignalSet, h.stream);
    if (plan.high.neighbour >= 0) b.signal(&words[1], 0, symcommSignalSet, h.stream);
    const BarrierArgs barrier = ctx.rma.barrier_args(halo_team(ctx, plan.over_rows));
    b.barrier(barrier, h.stream);  // the neighbours' slots are free, their words reset
    // My high slab fills the low halo of the part above (its slot 2, word 0); my low slab
    // the high halo of the part below (its slot 3, word 1).
    const struct {
      const HaloSide& side;
      int mine, theirs;
    } sends[] = {{plan.high, 0, 2}, {plan.low, 1, 3}};
    for (const auto& s : sends) {
      if (s.side.neighbour < 0) continue;
      const Box& box = s.side.send;
      const char* block = slots[s.mine];
      if (packed_run(box, layout))
        block = static_cast<const char*>(h.buffer) +
                layout.offset(box.lo[0], box.lo[1], box.lo[2]) * static_cast<int64_t>(e);
      else
        c.copy_box(slots[s.mine], packed_layout(box), h.buffer, layout, box.lo, box.hi, e,
                   h.stream);
      b.put(peer_address(ctx, slots[s.theirs], s.side.neighbour), block,
            static_cast<size_t>(box.count()) * e, symcommEngineCe, h.stream);
      b.signal(reinterpret_cast<uint64_t*>(peer_address(ctx, &words[s.theirs - 2],
                                                        s.side.neighbour)),
               1, symcommSignalSet, h.stream);
    }
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
};

const Registered<DecompBackend, CePipelinedBackend> kRegistered(kDescriptor.preference);

}  // namespace

DecompBackend& ce_pipelined_backend() {
  static DecompBackend& backend = *Registry<DecompBackend>::instance().find(kDescriptor.name);
  return backend;  // looked up once: every call that delegates to this backend comes here
}

}  // namespace symcomm
