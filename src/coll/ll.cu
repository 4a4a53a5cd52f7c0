// The "ll" algorithm (low-latency packets, NCCL's LL protocol): every collective is one
// kernel whose blocks store 16-byte packets {data0, flag, data1, flag} straight into a buffer
// in each peer's memory, and poll their own memory until the packets they expect carry the
// expected flag. The data is its own signal: no counter, no fence, one crossing of the link
// per message. Half of what crosses is flags, so this is for small messages. GPUs only. The
// protocol lives in ll/ (plan.h: a call's plan, a rank's area, the rounds' shapes;
// rounds.cuh: the kernel's body) and coll/device/ll_packet.cuh (the packets), which the host
// emulation tests/unit/ll_emulation.cc runs too.
//
// Packets (coll/device/ll_packet.cuh). One st.volatile.global.v4.u32 writes a packet. Each
// 8-byte half {data, flag} is single-copy atomic (over NVLink too), the 16 bytes as a whole
// are not: hence a flag in each half. The reader polls with ld.volatile.global.v4.u32 until
// both flags are the one it expects; each half is then the new one. 8 payload bytes per
// packet.
//
// Buffers. Each rank's area (symmetric, from the heap, cleared when the communicator is
// made) holds, for every sender world rank s, 2 halves x kMaxBlocks blocks x kThreads
// packets (nranks x 256 KiB), then seq[kMaxBlocks][nranks], this rank's own: per block and
// peer world rank, the rounds done with that peer, ever.
//
// Rounds. The bytes between this rank and member j (L_out sent to it, L_in received from
// it: both sides know both for every supported operation) travel in rounds of kRound
// (64 KiB), rounds = ceil(max(L_out, L_in) / kRound); round r is cut into slices of kSlice =
// kThreads x 8 bytes, block b taking [r kRound + b kSlice, + kSlice). A pair uses every
// block when it has more than one round, else ceil(max(L_out, L_in) / kSlice) blocks. Every
// block a pair uses does every round in both directions, a block whose slice is empty in a
// direction sending one flag-only "token" packet. Both sides derive all of it from
// (L_out, L_in). Round r of a call is round g = seq + r of its (block, pair): it uses half
// g % 2 with flag (uint32)(g + 1); the kernel reads seq when it starts and adds the rounds
// when it ends, so back-to-back calls on a stream (no host synchronisation) and graph
// replays stay in step.
//
// Reuse. Block b sends round g to j only after it received round g - 1 from j (and a
// __syncthreads separates its receive phase from its next send phase, so this holds for
// every thread, also where one thread polled a lone token), and j's block b sent round g - 1
// only after its own barrier that followed its reading of round g - 2, the round that used
// the same half. So no packet is overwritten before it was read. (As with NCCL's LL and sm's
// acknowledge(): a read is complete once its value is in a register, which the poll loop
// needs before the thread can reach the barrier.) Nothing else is shared between blocks.
//
// Flag wrap. A packet slot that no round wrote for 2^32 rounds of its (block, pair) would
// hold the expected flag again, and a round that uses more packets than the ones before it
// would read stale data. So a round whose g % kRefresh < 2 (both halves in turn, the first
// two rounds ever among them) writes every packet of its slot, flag-only beyond its slice:
// a slot never holds anything older than kRefresh rounds.
//
// Reductions combine the n contributions in team-rank order (16-bit floats in float, as
// copy/reduce.h does), so every rank gets bit-identical results. All-reduce is one shot:
// every rank sends its whole buffer to every peer. In place works: block b reads and writes
// only its own slices, each 8 bytes by the same thread (read to send, read to reduce, write).
//
// Segments. An all-reduce of several buffers as one (a group's small all-reduces:
// capi/coll_batch.cc) is a plain all-reduce of the message that would hold them all, each at
// an 8-byte boundary; its packets read their bytes from, and write them to, the buffers
// themselves (ll/plan.h's SegmentedPlan), in a kernel of its own.
//
// Every poll is bounded (SYMCOMM_WAIT_TIMEOUT, abort); a failure is recorded in the
// DeviceComm error slot, which the host reports at the communicator's next call, and the
// block exits. A block waits for its peers' blocks of the same index, which must therefore
// all be resident: the grid is at most kMaxBlocks blocks of kThreads, refused (as sm does)
// where the GPU cannot hold that many, e.g. a small MIG slice. Peers are addressed by world
// rank through the world's DeviceComm, so every team shares the counters of a pair: as
// always, calls that involve the same two ranks must be made in the same order on both.
#include <cuda_runtime.h>

#include <algorithm>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "coll/coll.h"
#include "coll/ll/plan.h"
#include "coll/ll/rounds.cuh"
#include "coll/resident_launch.cuh"
#include "copy/reduce.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

using namespace ll;

// Block b: every round of every pair that uses it (rounds.cuh).
template <typename T>
__global__ void __launch_bounds__(kThreads) ll_kernel(const __grid_constant__ Plan p) {
  pdl_begin();
  ll_block<T>(p);
}

// A segmented all-reduce (ll/plan.h's SegmentedPlan: a group's small all-reduces as one).
template <typename T>
__global__ void __launch_bounds__(kThreads) ll_segments_kernel(const __grid_constant__ SegmentedPlan p) {
  pdl_begin();
  ll_block<T>(p);
}

struct LlState final : CounterState {};

// The kernel instances for element type T (resident_launch.cuh).
constexpr auto kernel_of = [](auto zero) { return ll_kernel<decltype(zero)>; };
constexpr auto segments_kernel_of = [](auto zero) { return ll_segments_kernel<decltype(zero)>; };

// All-to-all-v with counts on the host only: it sizes its rounds from them.
constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"ll", "kernels storing low-latency packets into the peers"};
  d.max_team = kMaxTeam;
  d.max_segments = kMaxSegments;
  d.state = CollState::Counters;
  return d;
}();

class LlAlgorithm final : public CollAlgorithm {
 public:
  LlAlgorithm() : CollAlgorithm(kDescriptor) {}

  // A segmented all-reduce combines: a team of one would copy, which its plan does not do.
  Verdict own_conditions(const CollArgs& a, const CollContext&) const override {
    if (a.segments && a.team.size < 2)
      return Verdict::no("it reduces several buffers in one all-reduce on teams of 2 or more");
    return Verdict::yes();
  }

  std::string why_no_state(const CollContext& ctx) const override {
    return format("its packet buffers need %s of the heap, more than 1/16 of SYMCOMM_HEAP_MAX (%s)",
                  format_bytes(packets_bytes(ctx.topology().nranks)).c_str(),
                  format_bytes(ctx.heap().max_bytes()).c_str());
  }

  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.space() != symcommSpaceCuda) return nullptr;
    const int nranks = ctx.topology().nranks;
    // Every rank decides alike: ranks that disagree on the heap maximum fail when the heap
    // is created.
    if (packets_bytes(nranks) > ctx.heap().max_bytes() / 16) {
      SYMCOMM_INFO("no ll collectives on this communicator: %s of packet buffers exceed 1/16 "
                   "of the heap (%s)", format_bytes(packets_bytes(nranks)).c_str(),
                   format_bytes(ctx.heap().max_bytes()).c_str());
      return nullptr;
    }
    auto s = std::make_unique<LlState>();
    s->resident = ctx.fewest_across_ranks(std::min(resident_blocks(kernel_of, kThreads),
                                                   resident_blocks(segments_kernel_of, kThreads)));
    const size_t bytes = packets_bytes(nranks) + seq_bytes(nranks);
    ctx.place_counters(*s, bytes, bytes);  // flags 0 (never expected first), counters 0
    return s;
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    LlState& s = ctx.state<LlState>(this);
    ctx.check_counters(name());
    if (a.segments) {
      const SegmentedPlan p = segmented_plan_of(a, s.world, s.area, kRefresh);
      const int blocks = grid_blocks(p);
      if (blocks > 0)
        launch_resident(segments_kernel_of, p, blocks, kThreads, s.resident, true, a.type,
                        static_cast<cudaStream_t>(a.stream), "ll", "");
      return;
    }
    Plan p = plan_of(a, s.world, s.area, kRefresh);
    const int blocks = grid_blocks(p);
    if (blocks == 0) return;
    launch_resident(kernel_of, p, blocks, kThreads, s.resident, p.reduce, a.type,
                    static_cast<cudaStream_t>(a.stream), "ll", "");
  }
};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&ll_kernel<uint8_t>));

const Registered<CollAlgorithm, LlAlgorithm> kRegistered(40);

}  // namespace

}  // namespace symcomm
