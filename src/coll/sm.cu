// The "sm" algorithm: every collective is one kernel (two for a large all-reduce or
// broadcast) whose blocks move the data with SM loads and stores through per-pair channels.
// GPUs only. The protocol lives in sm/ (plan.h: a call's plan and a rank's area; calls.h:
// the plans of each collective; channels.cuh and counts.cuh: the kernels' bodies), which
// the host emulation tests/unit/sm_emulation.cc runs too.
//
// Channels. For every ordered pair of ranks (s -> r) there are kChannels channels; each is
// a ring of kDepth slots in r's memory that s writes, a `posted` counter in r's memory (the
// chunks s has written so far, ever) and an `acked` counter in s's memory (the chunks r has
// finished reading, ever). A sender writes chunk g into slot g % kDepth once acked >= g + 1
// - kDepth, then (fence.sc.sys) stores posted = g + 1; the receiver waits (acquire loads)
// for posted >= g + 1, reads the slot and stores acked = g + 1 (no fence: see
// acknowledge()). Each side keeps how many chunks it has sent / consumed per channel in its
// own memory, so the counters only grow: no reset between calls, back-to-back calls need no
// host synchronisation, and a CUDA graph replays correctly (the kernel reads the counters
// when it runs, not when it was captured).
//
// A message of L bytes from s to r is cut into chunks (chunk_plan); chunk i travels on
// channel i % channels, so both sides derive the same schedule from L alone. Blocks:
// receivers (one per peer and channel; or, for reductions, red_blocks per channel that wait
// for every peer's chunk and each reduce a slice of it with this rank's own data in
// team-rank order, so that every rank computes bit-identical results), then senders (one
// per peer and channel), then blocks for this rank's own part. Every wait is bounded
// (SYMCOMM_WAIT_TIMEOUT, abort).
//
// The blocks of one kernel wait for each other's peers: they must all be resident at once
// (some 2 * SYMCOMM_COLL_SM_BLOCKS[_LARGE] + kSelfBlocks blocks of kThreads threads), as
// with NCCL: channels per pair are capped so that a grid fits in the fewest blocks any
// member's GPU holds (channels_that_fit; every member derives the same), and a team too
// large for one channel per pair has no sm collectives (its refusal says so). Counters are per
// pair of world ranks, shared by all teams: like every collective, calls that involve the
// same two ranks must be made in the same order on both.
#include <cuda_runtime.h>

#include <algorithm>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/coll.h"
#include "coll/resident_launch.cuh"
#include "coll/sm/calls.h"
#include "coll/sm/counts.cuh"
#include "coll/sm/plan.h"
#include "copy/reduce.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

const SizeParam kRingBytes("SYMCOMM_COLL_SM_BYTES", "64M",
                           "symmetric memory per rank for the sm collectives' channel rings "
                           "(at most 1/16 of SYMCOMM_HEAP_MAX is used)");

const IntParam kBlocks("SYMCOMM_COLL_SM_BLOCKS", "40",
                       "blocks with which an sm collective sends (as many receive): channels per "
                       "pair = this / (team size - 1), at most 32 and at most what fits in "
                       "the GPU at once; 1 to 256; the same on every rank", 1, 256);
const IntParam kBlocksLarge("SYMCOMM_COLL_SM_BLOCKS_LARGE", "96",
                            "SYMCOMM_COLL_SM_BLOCKS for messages between two members of "
                            "SYMCOMM_COLL_SM_LARGE bytes or more; 1 to 256", 1, 256);
// 4 ranks: 96 blocks moved 1 GiB all-to-alls 13% faster than 40, and 16 MiB ones (4 MiB a
// pair) 17% slower (bench/results/h200x4/coll_0ce0fed_b96.jsonl).
const SizeParam kLargeFrom("SYMCOMM_COLL_SM_LARGE", "16M",
                           "messages between two members from which the sm collectives use "
                           "SYMCOMM_COLL_SM_BLOCKS_LARGE");

using namespace sm;

// A kernel of its own, so that its registers do not count against sm_kernel's.
__global__ void __launch_bounds__(kThreads, 2) sm_counts_kernel(const __grid_constant__ Plan p) {
  pdl_begin();
  device_counts_block(p);
}

// Blocks: [receivers | senders | own part], each group `channels` blocks per peer (or per
// channel alone for reducing receivers and the own part). Two blocks per SM (at most 64
// registers a thread): 264 resident blocks on an H200, which the largest grids need
// (2 x 7 x 14 + 32 = 228 for 8 ranks with SYMCOMM_COLL_SM_BLOCKS_LARGE=96; the own part's
// blocks give way where a grid would not fit: grid_blocks).
template <typename T>
__global__ void __launch_bounds__(kThreads, 2) sm_kernel(const __grid_constant__ Plan p) {
  pdl_begin();
  sm_block<T>(p);
}

struct SmState final : CounterState {
  uint64_t slot = 0;
  int resident_counts = 0;  // blocks of sm_counts_kernel the GPU holds
  // The most blocks a grid of either kernel may have on every member's GPU.
  int room() const { return std::min(resident, resident_counts); }
};

// The kernel instance for element type T (resident_launch.cuh), and the one kernel for
// counts on the device.
constexpr auto kernel_of = [](auto zero) { return sm_kernel<decltype(zero)>; };
constexpr auto counts_kernel_of = [](auto) { return sm_counts_kernel; };

constexpr const char* kRemedy = "lower SYMCOMM_COLL_SM_BLOCKS / SYMCOMM_COLL_SM_BLOCKS_LARGE";

constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"sm", "kernels of SM loads and stores through per-pair channels"};
  d.ops = kCoreOps | op_bit(CollOp::Reduce) | op_bit(CollOp::Gather) | op_bit(CollOp::Scatter);
  d.device_counts = kCudaSpace;
  d.max_team = kMaxTeam;
  d.state = CollState::Counters;
  return d;
}();

class SmAlgorithm final : public CollAlgorithm {
 public:
  SmAlgorithm() : CollAlgorithm(kDescriptor) {}

  std::string why_no_state(const CollContext& ctx) const override {
    return format("its rings need %s of the heap with 4 KiB slots, more than 1/16 of "
                  "SYMCOMM_HEAP_MAX (%s) or SYMCOMM_COLL_SM_BYTES (%s) allow",
                  format_bytes(ring_bytes(ctx.topology().nranks, 4096)).c_str(),
                  format_bytes(ctx.heap().max_bytes()).c_str(),
                  format_bytes(kRingBytes.get()).c_str());
  }

  Verdict own_conditions(const CollArgs& a, const CollContext& ctx) const override {
    const int room = ctx.state<SmState>(this).room();
    if (channels_that_fit(a.team.size, room, kCountsSelfBlocks) >= 1) return Verdict::yes();
    return Verdict::no(format("a team of %d needs %d blocks resident at once and a member's GPU "
                              "holds %d (fewer SMs: MPS or a partition)", a.team.size,
                              2 * (a.team.size - 1) + kCountsSelfBlocks, room));
  }

  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.space() != symcommSpaceCuda) return nullptr;
    const int nranks = ctx.topology().nranks;
    // SYMCOMM_COLL_SM_BYTES of rings (at most 1/16 of the heap), in slots of 4 KiB to 256 KiB
    // (64 KiB for 8 ranks with the default). A heap too small for 4 KiB slots has no sm
    // algorithm (its refusal says so); every rank decides alike, since ranks that disagree on
    // the heap maximum fail when the heap is created.
    const uint64_t budget = std::min<uint64_t>(kRingBytes.get(), ctx.heap().max_bytes() / 16);
    const uint64_t slot = std::min<uint64_t>(256 << 10, budget / ring_bytes(nranks, 1) / 4096 * 4096);
    if (slot < 4096) {
      SYMCOMM_INFO("no sm collectives on this communicator: %s of rings do not fit in %s",
                   format_bytes(ring_bytes(nranks, 4096)).c_str(), format_bytes(budget).c_str());
      return nullptr;
    }
    auto s = std::make_unique<SmState>();
    s->slot = slot;
    const size_t bytes = flags_bytes(nranks) + ring_bytes(nranks, slot);
    s->resident = ctx.fewest_across_ranks(resident_blocks(kernel_of, kThreads));
    s->resident_counts = ctx.fewest_across_ranks(resident_blocks(counts_kernel_of, kThreads));
    ctx.place_counters(*s, bytes, flags_bytes(nranks));
    return s;
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    SmState& s = ctx.state<SmState>(this);
    ctx.check_counters(name());
    Plan p = base_plan(a, s);
    if (a.op == CollOp::ReduceScatter || a.op == CollOp::AllReduce || a.op == CollOp::Reduce) {
      Plan plans[2];
      for (int k = 0, count = reduce_plans(p, a, plans); k < count; ++k) launch(a, s, plans[k]);
      return;
    }
    if (a.counts_on_device) {
      Plan q = device_counts_plan(p, a);
      launch_resident(counts_kernel_of, q, grid_blocks(q), kThreads, s.resident_counts, false,
                      a.type, static_cast<cudaStream_t>(a.stream), "sm", kRemedy);
      return;
    }
    Plan plans[2];
    for (int k = 0, count = move_plans(p, a, plans); k < count; ++k) launch(a, s, plans[k]);
  }

 private:
  static Plan base_plan(const CollArgs& a, const SmState& s) {
    return sm::base_plan(a, s.world, s.area, s.slot, static_cast<int>(kBlocks.get()),
                         static_cast<int>(kBlocksLarge.get()), s.room(), kLargeFrom.get());
  }


  // The blocks wait for each other's peers, so they must all be resident at once: a grid
  // larger than the GPU holds is refused rather than left to hang. (Kernels running beside
  // it on other streams take room too, as with NCCL.)
  static void launch(const CollArgs& a, const SmState& s, Plan& p) {
    const int blocks = grid_blocks(p, s.resident);
    if (blocks == 0) return;
    launch_resident(kernel_of, p, blocks, kThreads, s.resident, p.reduce, a.type,
                    static_cast<cudaStream_t>(a.stream), "sm", kRemedy);
  }

};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&sm_kernel<uint8_t>));

const Registered<CollAlgorithm, SmAlgorithm> kRegistered(10);

}  // namespace

}  // namespace symcomm
