// What the "ce_pipelined" and "transport" backends share: per member, a block put into the
// member's workspace and then the member's word for this rank SET 1; each member's block
// unpacked as soon as its word is set. No barrier at the end. The backends differ only in how
// a block goes to a member (send_block): ce_pipelined by copy engines into mapped memory,
// transport by each member's transport.
//
// Transpose, per call:
//   reset this rank's signal words (one per member it receives from) to 0
//   barrier (receive areas are free, every member's words are reset)
//   for each other member, starting with the next one: send_block (its block, packed first
//     where it must be, into the member's receive area; then the member's word `me` SET 1)
//   my own block: straight from input to output (staged in the receive area when in place)
//   for each other member, starting with the previous one (the first to have sent to me):
//     wait until its word >= 1, unpack (a linear copy where the block is a contiguous run of
//     the output)
// Halo exchange: the same with two words (what fills my low halo, my high halo) and four
// slots. A dimension that is not split is filled from the rank's own buffer directly.
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
#pragma once

#include <cstddef>
#include <cstdint>

#include "decomp/backend.h"

namespace symcomm {

class SignalledBlocksBackend : public DecompBackend {
 public:
  using DecompBackend::DecompBackend;

  // The signal words, then the send and the receive areas.
  size_t transpose_workspace(const DecompContext& ctx, size_t elem) const override;
  void transpose(const DecompContext& ctx, const TransposeCall& t) override;
  // Two words, then four slots: my high slab, my low slab (packed, to send), what fills my
  // low halo, what fills my high halo.
  size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                        const int64_t* halo, const int64_t* padding) const override;
  void halo(const DecompContext& ctx, const HaloCall& h) override;

 protected:
  // `box` of `buffer` (laid out as `layout`) to world rank `pe`: into its `dst` (this rank's
  // symmetric address of the place in the workspace), then its word `sig` (likewise) SET 1,
  // on `stream`, `e` bytes an element. `staging`: this rank's place to pack the box into
  // where it is not sent from the buffer itself.
  virtual void send_block(const DecompContext& ctx, int pe, const void* buffer,
                          const BoxLayout& layout, const Box& box, char* staging, char* dst,
                          uint64_t* sig, size_t e, symcommStream_t stream) const = 0;
};

}  // namespace symcomm
