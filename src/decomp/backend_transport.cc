// The "transport" backend: transposes and halo exchanges through each member's transport
// (src/transport/transport.h: `lsa` for the ranks of this node, `net` for the others), so it
// runs where the ranks of a row or column are on other nodes. It needs a transport to every
// rank, not load/store reach. Per member, one put-with-signal carries its block into the
// member's receive area and then sets the member's word for this rank; each member's block
// is unpacked as soon as its signal has arrived.
//
// The algorithm, and its signal words, are ce_pipelined's (decomp/signalled_blocks.h), with
// the transports in place of the mapping: the entry barrier reaches a member on another node
// through its transport, and a block goes to a member as one put-with-signal through the
// member's transport (the signal applied only once the block has landed), from the input
// itself where the block is one contiguous run of it and the transport takes the input as it
// is (the staging rule below), else packed into the send area first.
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
#include "decomp/signalled_blocks.h"

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

class TransportBackend final : public SignalledBlocksBackend {
 public:
  TransportBackend() : SignalledBlocksBackend(kDescriptor) {}

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
  // Through pe's transport: from the buffer itself where the box is one contiguous run of it
  // and the transport takes the buffer as it is; else packed into `staging` first.
  void send_block(const DecompContext& ctx, int pe, const void* buffer, const BoxLayout& layout,
                  const Box& box, char* staging, char* dst, uint64_t* sig, size_t e,
                  symcommStream_t stream) const override {
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
