// The "twoshot" algorithm: all-reduce in two shots, reduce-scatter in the first alone, and
// reduce in the first with its results sent to the root, by loads from and stores into the
// peers' memory straight from the kernel: no rings, no packets, no copy engine.
//
// Segments. The n members cut the message into n segments (an all-reduce's buffer into
// n pieces of ceil(count / n) elements rounded up to 16 bytes, the last shorter or empty; a
// reduce-scatter's send into its n blocks). Member s owns segment s:
//   shot 1: it reads segment s of every member's contribution, combines them in team-rank
//     order (16-bit floats in float, as copy/reduce.h does: every rank gets bit-identical
//     results) and writes the result to its recv;
//   shot 2 (all-reduce): it also stores the result into every peer's copy of segment s;
//   (reduce) it stores the result into the root's stage_out instead of its own recv (only
//   the root knows its recv; the others may pass NULL), and the root copies each round's
//   segments out, as a staged all-reduce does: (n - 1) / n of the buffer into the root,
//   where a reduce of one shot brings in n - 1 buffers.
// Each member reads (n - 1) / n of the message over the links and writes as much: the
// traffic of a ring, with two synchronisations instead of 2 (n - 1) steps.
//
// Direct or staged. Where send is addressable by the peers (symmetric memory or a registered
// buffer, as the API asks: the same object on every member, so every rank decides alike)
// and 16-byte aligned, with segments that are multiples of 16 bytes, peers read it in
// place. Otherwise each rank first copies its send into its stage_in (a symmetric area of
// SYMCOMM_COLL_TWOSHOT_BYTES) and peers read that. Likewise shot 2 stores into the peers'
// recv where it is addressable and aligned, or into their stage_out, which each rank then
// copies out. Staged, the message goes through in rounds of S bytes per segment (S = the
// area / n, a multiple of 16); direct both ways, in one round.
//
// Blocks. Round r of segment s is [r S, r S + S) of it; block b of the grid takes the
// slice [b sl, b sl + sl) of every segment's round (sl = ceil(S' / blocks) rounded to 16
// bytes, S' = min(S, the longest segment)), and pairs with block b of every member: every
// rank launches the same grid for the same call, so the blocks of one index across the team
// form an independent group. Per round a block: (staged) copies its slices of its own send
// into stage_in; signals READY to every member and waits for every member's READY; reduces
// its slice of its own segment, writing recv and (all-reduce) the members' copies; signals
// DONE and waits for every member's DONE; (all-reduce, staged) copies its slices of the
// other segments out of stage_out.
//
// Flags. Each rank's area holds ready[kMaxBlocks][nranks] and done[kMaxBlocks][nranks],
// written by the peers (indexed by the writer's world rank), and seq[kMaxBlocks][nranks],
// its own: per block and peer, the rounds done with that peer, ever. Round r of a call is
// round g = seq + r + 1 of the pair; the signal writes g (64 bits: no wrap) and the wait
// waits for >= g. The kernel reads seq when it starts and adds the rounds when it ends, so
// back-to-back calls on a stream and graph replays stay in step; counters are per pair, so
// calls over different teams interleave as long as the calls that involve the same two
// ranks are made in the same order on both (as always).
//
// Ordering. A signal is the pattern of barrier_block: __syncthreads, then the signalling
// thread's fence.sc.sys, then a relaxed system-scope store; a wait is an acquire poll by
// one thread per member, then __syncthreads. So READY publishes the stage_in copy (and the
// stream's earlier writes of send, which precede the kernel), and DONE publishes the
// stores of shot 2 and follows every load of shot 1 (values in registers, stored, before
// the barrier).
//
// Reuse. When a block has seen every member's DONE of a round, no member reads its
// stage_in or send, or writes its stage_out or recv, for that round any more. Its next
// round's stage_in copy therefore overwrites nothing still read; a member stores into its
// stage_out for the next round only after its READY of that round, which it signals after
// copying the previous round out. When the kernel ends, the peers are done with this
// rank's send and recv: the stream may reuse them at once.
//
// In place (all-reduce, send == recv): segment s of a rank's buffer is read only by member
// s's block of the slice, which writes it only after reading it; staged, stage_in holds the
// round's input before anything is written.
//
// Waits are bounded (SYMCOMM_WAIT_TIMEOUT, abort); a failure is recorded in the DeviceComm
// error slot, which the host reports at the communicator's next call, and the block exits.
// As in sm and ll, the blocks of a grid must all be resident (resident_launch.cuh).
//
// The protocol lives in twoshot/ (plan.h: a call's plan and shape, a rank's area; shots.cuh:
// the kernel), which the host emulation tests/unit/twoshot_emulation.cc runs too.
#include <cuda_runtime.h>

#include <algorithm>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/coll.h"
#include "coll/resident_launch.cuh"
#include "coll/twoshot/plan.h"
#include "coll/twoshot/shots.cuh"
#include "copy/reduce.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

const SizeParam kStageBytes("SYMCOMM_COLL_TWOSHOT_BYTES", "8M",
                            "symmetric staging memory per rank of the twoshot collectives, for "
                            "buffers that are not symmetric (twice this; at most 1/16 of "
                            "SYMCOMM_HEAP_MAX is used)");

using namespace twoshot;

// 4 ranks: 128 blocks took 3% less time than 64 for all-reduces of 16-64 MiB, the same
// below (bench/results/h200x4/coll_twoshot_b128_ccbbbf9.jsonl against coll_fa9542c_reductions).
// 192 and 256 (kMaxBlocks raised for the run) were no faster from 16 MiB to 1 GiB, and 7%
// slower for reduce-scatters of 1 GiB (bench/results/h200x4/twoshot_blocks_5bf03ca.txt).
const IntParam kBlocks("SYMCOMM_COLL_TWOSHOT_BLOCKS", "128",
                       "most blocks of a twoshot collective (1 per 8 KiB of a segment's "
                       "round), 1 to 128; the same on every rank", 1, kMaxBlocks);

struct TwoshotState final : CounterState {  // area: flags, stage_in, stage_out
  uint64_t stage = 0;  // bytes of each stage area
};

constexpr auto kernel_of = [](auto zero) { return twoshot_kernel<decltype(zero)>; };


constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"twoshot", "kernels that load from and store into the peers' buffers"};
  d.ops = op_bit(CollOp::AllReduce) | op_bit(CollOp::ReduceScatter) | op_bit(CollOp::Reduce);
  d.max_team = kMaxTeam;
  d.state = CollState::Counters;
  return d;
}();

class TwoshotAlgorithm final : public CollAlgorithm {
 public:
  TwoshotAlgorithm() : CollAlgorithm(kDescriptor) {}

  std::string why_no_state(const CollContext& ctx) const override {
    return format("its staging areas need 2 x SYMCOMM_COLL_TWOSHOT_BYTES (%s) of the heap, "
                  "more than 1/16 of SYMCOMM_HEAP_MAX (%s), or are smaller than 16 bytes "
                  "per rank",
                  format_bytes(kStageBytes.get()).c_str(),
                  format_bytes(ctx.heap().max_bytes()).c_str());
  }

  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.space() != symcommSpaceCuda) return nullptr;
    const int nranks = ctx.topology().nranks;
    // Every rank decides alike: ranks that disagree on the heap maximum fail when the heap
    // is created, and parameters are to be set alike.
    const uint64_t stage = kStageBytes.get() / 256 * 256;
    const size_t bytes = flags_bytes(nranks) + 2 * stage;
    if (stage / static_cast<uint64_t>(nranks) < 16 || bytes > ctx.heap().max_bytes() / 16) {
      SYMCOMM_INFO("no twoshot collectives on this communicator: %s of staging areas do not "
                   "fit in 1/16 of the heap (%s)", format_bytes(bytes).c_str(),
                   format_bytes(ctx.heap().max_bytes()).c_str());
      return nullptr;
    }
    auto s = std::make_unique<TwoshotState>();
    s->stage = stage;
    s->resident = ctx.fewest_across_ranks(resident_blocks(kernel_of, kThreads));
    ctx.place_counters(*s, bytes, flags_bytes(nranks));  // flags and counters 0
    return s;
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    TwoshotState& s = ctx.state<TwoshotState>(this);
    ctx.check_counters(name());
    const int n = a.team.size;
    const bool all = a.op == CollOp::AllReduce, reduce = a.op == CollOp::Reduce;
    const uint64_t block = a.count * a.elem;  // all-reduce, reduce: the buffer; else a segment
    if (block == 0) return;
    const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    if (n == 1) {  // nothing to combine: a copy
      if (a.send != a.recv)
        SYMCOMM_CUDART(cudaMemcpyAsync(a.recv, a.send, block, cudaMemcpyDeviceToDevice, stream));
      return;
    }
    const int64_t max_blocks = kBlocks.get();
    const uint64_t send_bytes = all || reduce ? block : block * static_cast<uint64_t>(n);
    // In place only where every member decides alike: addressable, and (a registered buffer
    // may start at different addresses on different ranks) aligned alike.
    const bool send_direct =
        ctx.addressable(a.send, send_bytes) && ctx.aligned_alike(a.send, 16);
    // A reduce's recv is the root's alone (the others may pass NULL): staged, always.
    const bool recv_direct =
        !reduce && ctx.addressable(a.recv, block) && ctx.aligned_alike(a.recv, 16);
    // No more blocks than every member's GPU holds at once (the same figure on every member).
    const uint64_t most = static_cast<uint64_t>(std::min<int64_t>(max_blocks, s.resident));
    Plan p{};
    const uint64_t blocks = make_plan(p, a, s.world, s.area, s.stage, send_direct, recv_direct,
                                      most, [&](const void* q, int j) { return ctx.on(a, q, j); });
    launch_resident(kernel_of, p, static_cast<int>(blocks), kThreads, s.resident, true, a.type,
                    stream, "twoshot", "lower SYMCOMM_COLL_TWOSHOT_BLOCKS");
  }
};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&twoshot_kernel<uint8_t>));

const Registered<CollAlgorithm, TwoshotAlgorithm> kRegistered(50);

}  // namespace

}  // namespace symcomm
