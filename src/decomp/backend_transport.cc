// The "transport" backend: transposes and halo exchanges through each member's transport
// (src/transport/transport.h: `lsa` for the ranks of this node, `net` for the others), so it
// runs where the ranks of a row or column are on other nodes. It needs a transport to every
// rank, not load/store reach. Per member, one put-with-signal carries its block into the
// member's receive area and then sets the member's word for this rank; each member's block
// is unpacked as soon as its signal has arrived.
//
// Transpose, per call (ce_pipelined's shape, with the transports in place of the mapping):
//   reset this rank's signal words (one per member it receives from) to 0
//   barrier (receive areas free, every member's words reset; a member on another node
//     arrives through its transport)
//   for each other member, starting with the next one:
//     the block's source: the input itself where the block is one contiguous run of it and
//       the member's transport takes the input as it is (the staging rule below), else the
//       block packed into the send area
//     put-with-signal through the member's transport: the block into the member's receive
//       area, then the member's word `me` SET 1 (applied only once the block has landed)
//   my own block: straight from input to output (staged in the receive area when in place)
//   for each other member, starting with the previous one: wait until its word >= 1, unpack
//
// The signal words are ce_pipelined's (why they are reset rather than counted: CUDA graphs,
// and a workspace that holds anything before the call): they sit at the start of the
// workspace, word k written only by member k of the call's team. The halo exchange is the
// same with two words and four slots; a dimension that is not split is filled from the
// rank's own buffer.
//
// The staging rule (transport_takes_as_is, docs/decomp.md): a block goes to a transport from
// the caller's buffer only where that transport takes the buffer as it is. A load/store
// transport takes any buffer this rank's device reaches; the network takes the symmetric heap,
// which it registered, and registered buffers only where it reaches those. A user buffer it
// does not take (it would need a registration per call, and GPU memory a provider with
// FI_HMEM) is packed into the send area first, even where it is one contiguous run. Puts
// always land in the members' workspaces (heap), never in their buffers. What went which way
// is counted per decomposition (symcommDecompGetTraffic).
//
// Every call goes through the transports with the caller's stream: in the host space each
// completes within its call; in the cuda space they are stream-ordered, so the backend runs
// wherever every member's transport carries the cuda space.
#include "decomp/backend.h"

namespace symcomm {

namespace {

constexpr DecompDescriptor kDescriptor = {
    .name = "transport",
    // After the load/store backends (which move the same blocks without a transport where
    // every rank is mapped; for_unmapped_ranks keeps the automatic choice and the autotuner
    // off it there), before the NCCL ones.
    .preference = 55,
    .spaces = kDecompHostAndCuda,
    .load_store_peers = false,
    .nccl = false,
    .copies_wait_for_peers = false,
    .for_unmapped_ranks = true,
};

class TransportBackend final : public DecompBackend {
 public:
  TransportBackend() : DecompBackend(kDescriptor) {}

  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override {
    return signal_words_bytes(largest_team(ctx.geometry)) +
           2 * static_cast<size_t>(staging_elements(ctx.geometry)) * elem;
  }

  void transpose(const DecompContext& ctx, const TransposeCall& t) override {
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

 protected:
  Verdict own_conditions(const DecompContext& ctx) const override {
    const Transports& transports = ctx.rma.transports();
    for (int r = 0; r < ctx.rma.topology().nranks; ++r)
      if (!transports.connected(r))
        return Verdict::no("it sends through each rank's transport: " +
                           transports.why_unconnected(r));
    return Verdict::yes();
  }

 private:
  // `box` of `buffer` (laid out as `layout`) to world rank `pe`: into its `dst` (this rank's
  // symmetric address of the place in the workspace), then its word `sig` (likewise) SET 1,
  // through its transport. Sent from the buffer itself where the box is one contiguous run
  // of it and the transport takes the buffer as it is; else packed into `staging` first.
  static void send_block(const DecompContext& ctx, int pe, const void* buffer,
                         const BoxLayout& layout, const Box& box, char* staging, char* dst,
                         uint64_t* sig, size_t e, symcommStream_t stream) {
    Transport& transport = ctx.rma.transports().to(pe);
    const size_t bytes = static_cast<size_t>(box.count()) * e;
    const char* run = nullptr;
    if (packed_run(box, layout))
      run = static_cast<const char*>(buffer) +
            layout.offset(box.lo[0], box.lo[1], box.lo[2]) * static_cast<int64_t>(e);
    const bool as_is = run && transport_takes_as_is(ctx, transport, run, bytes);
    if (!as_is)
      ctx.copies.copy_box(staging, packed_layout(box), buffer, layout, box.lo, box.hi, e, stream);
    transport.put_signal(pe, dst, as_is ? run : staging, bytes, sig, 1, symcommSignalSet,
                         symcommEngineCe, stream);
    if (ctx.traffic) ctx.traffic->add(!transport.load_store(), !as_is, bytes);
  }
};

const Registered<DecompBackend, TransportBackend> kRegistered(kDescriptor.preference);

}  // namespace

}  // namespace symcomm
