// The "ce_pipelined" backend: per member, pack its block, put it with the copy engines into
// the member's receive area, and signal the member (a put-signal); each rank unpacks a
// member's block as soon as that member's signal has arrived, so the unpack of early blocks
// overlaps the transfers still coming in from later senders. No barrier at the end.
//
// The algorithm, and why its signal words are reset rather than counted:
// decomp/signalled_blocks.h. Here a block goes by a copy-engine put into the member's mapped
// workspace, then the member's word is SET by a stream memory operation.
//
// What the shortcuts touch (docs/decomp.md): a skipped pack makes the copy engine read this
// rank's input or halo buffer itself (memory its GPU can access: checked by the C API);
// every put writes a peer's workspace (heap), never a peer's buffer, so no rule about the
// buffers' kind applies. A block that is not one contiguous run of the input is packed.
#include "decomp/signalled_blocks.h"

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

class CePipelinedBackend final : public SignalledBlocksBackend {
 public:
  CePipelinedBackend() : SignalledBlocksBackend(kDescriptor) {}

 private:
  // From the buffer itself where the box is one contiguous run of it (the copy engine reads
  // it), else packed into `staging` first; a copy-engine put into the member's mapped
  // workspace, then the SET.
  void send_block(const DecompContext& ctx, int pe, const void* buffer, const BoxLayout& layout,
                  const Box& box, char* staging, char* dst, uint64_t* sig, size_t e,
                  symcommStream_t stream) const override {
    RmaBackend& b = ctx.rma.backend();
    const char* block = staging;
    if (packed_run(box, layout))
      block = static_cast<const char*>(buffer) +
              layout.offset(box.lo[0], box.lo[1], box.lo[2]) * static_cast<int64_t>(e);
    else
      ctx.copies.copy_box(staging, packed_layout(box), buffer, layout, box.lo, box.hi, e, stream);
    b.put(peer_address(ctx, dst, pe), block, static_cast<size_t>(box.count()) * e,
          symcommEngineCe, stream);
    b.signal(reinterpret_cast<uint64_t*>(peer_address(ctx, sig, pe)), 1, symcommSignalSet,
             stream);
  }
};

const Registered<DecompBackend, CePipelinedBackend> kRegistered(kDescriptor.preference);

}  // namespace

DecompBackend& ce_pipelined_backend() {
  static DecompBackend& backend = *Registry<DecompBackend>::instance().find(kDescriptor.name);
  return backend;  // looked up once: every call that delegates to this backend comes here
}

}  // namespace symcomm
