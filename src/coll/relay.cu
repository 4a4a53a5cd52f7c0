// The "relay" algorithm: broadcast into receive buffers the peers address in place
// (symmetric, or registered), in one kernel whose every link carries the message once.
//
// Why. sm's root stores every byte into every member (egress (n - 1) x L for a message of L
// bytes); its split form (a scatter, then an all-gather) moves 2 (n - 1) / n x L per rank
// in two kernels; NCCL's ring pipelines L through n - 1 hops. Here the root's egress is L
// and every other member's ingress L, in a pipeline of depth 2.
//
// Pieces. The n - 1 members other than the root ("owners", in team-rank order) own one
// piece of the message each: owner k's is [k P, (k + 1) P) of it (P = L / (n - 1) rounded
// up to 16 bytes; the last piece shorter, or empty). The root stores piece k straight into
// owner k's receive buffer, at the piece's own offset; owner k forwards it, chunk by chunk
// as it arrives, from its own receive buffer into every other owner's (n - 2 stores of each
// chunk, loaded once). The root's own receive buffer is a local copy (none in place).
//
// Lanes and chunks. A piece is cut into chunks of C bytes (a multiple of 16); the grid's
// first `lanes` blocks are lanes, and lane b handles chunks b, b + lanes, b + 2 lanes, ...
// of every piece, pairing with lane b of every member: the blocks of one index across the
// team form an independent group, so counters are per (lane, pair of world ranks) and need
// no ordering between blocks. Every member derives the chunks and lanes from L, n and the
// SYMCOMM_COLL_RELAY_* parameters, which must be set alike on every rank (shape_call). The
// root's further blocks copy its send into its own receive buffer: as many as the GPU holds
// beside the lanes (the grid must be resident), none in place; with none to spare, the copy
// engines copy it before the kernel.
//
// Counters. Each rank's area holds, per lane and world rank w:
//   ready[b][w]  written by w: the calls w has begun with this rank (its receive buffer may
//                now be written: the stream's earlier work on it is done);
//   data[b][w]   written by w: the chunks w has stored into this rank in lane b, ever;
//   calls, got, put  this rank's own: the calls begun with w, the chunks received from w and
//                the chunks stored into w, read when the block starts and advanced when it
//                ends. Both sides of a pair advance them alike (every member derives every
//                piece's chunk count), so back-to-back calls and graph replays stay in step.
// A block: every member but the root signals `ready` to every other member; every member
// waits for the `ready` of the members it writes (the root: every owner; an owner: the other
// owners). The root then stores chunk j of lane b into every owner (starting at a different
// owner per lane and round, so that lanes spread over the links), and thread m signals
// `data` = put + j + 1 to member m (see "Signals"). An owner waits (thread `root`) for the
// root's chunk j, forwards it, and thread m signals `data` to owner m; it ends when every
// other owner's `data` has reached that owner's chunk count in the lane.
//
// Signals. Where a lane has several rounds, or pieces are over kEagerPiece, the root signals
// each owner right after its chunk: the owner starts forwarding before the root has served
// the others, which spreads the owners' forwarding over the round (4 x H200: 4-8 MiB 6-12%
// faster than one signal per round). Otherwise it signals every owner at the round's end:
// one fence instead of one per owner, in series, which costs a short lane more than the
// stagger gains (256 KiB-2 MiB: 0.5-3.3 us slower per call; bench/results/h200x4/
// relay_eager_91cb5b8.jsonl).
//
// Ordering. A `data` signal is __syncthreads, then the signalling thread's fence.sc.sys,
// then a relaxed system-scope store (as twoshot's); a wait is an acquire poll by one thread,
// then __syncthreads. Data other GPUs stored is loaded with ld.global.cg (L2). `ready` is a
// store with no fence, as sm's acknowledgements: it follows the kernel's griddepcontrol.wait,
// so everything earlier on the stream has completed.
//
// Every thread m keeps member m's counters in registers: no shared memory, no thread reads
// another's values (the host emulation runs threads with private state).
//
// Waits are bounded (SYMCOMM_WAIT_TIMEOUT, abort); a failure is recorded in the DeviceComm
// error slot, which the host reports at the communicator's next call, and the block exits.
// The grid's blocks must all be resident (resident_launch.cuh), as with sm and twoshot.
//
// The protocol lives in relay/ (plan.h: a call's plan and shape, a rank's counters;
// lanes.cuh: the kernel), which the host emulation tests/unit/relay_emulation.cc runs
// too.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/coll.h"
#include "coll/relay/lanes.cuh"
#include "coll/relay/plan.h"
#include "coll/resident_launch.cuh"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

using namespace relay;

// 4 x H200 (bench/results/h200x4/relay_sweep_f89fd9d.jsonl): 8 chunks per lane gave the
// best large broadcasts (128 MiB: 449 us, 4 chunks 484), one chunk the best small ones
// (1 MiB: 15.9 us, 4 chunks 24.3): each chunk a lane adds costs some 3.5 us of signals, so
// chunks are at least kMinChunk where a lane has more than one. 96 lanes beat 64 by 1-5%
// from 16 MiB (relay_lanes_cc707f7.jsonl); 128 leave the root's own copy 4 blocks. Lanes
// of 8 KiB where pieces are at most kEagerPiece (one chunk each: more stores in flight)
// took 128 KiB-2 MiB 1.7-3.7 us less than lanes of 32 KiB, three runs each; larger pieces
// keep 32 KiB a lane (8 KiB: 4 MiB 4% slower), relay_lane_bytes_f5a72dc.jsonl.
const IntParam kLanes("SYMCOMM_COLL_RELAY_BLOCKS", "96",
                      "most lanes (blocks per member) of a relay broadcast, 1 to 128; the same "
                      "on every rank", 1, kMaxLanes);
const SizeParam kLaneBytes("SYMCOMM_COLL_RELAY_LANE_BYTES", "8K",
                           "bytes of a member's piece per lane of a relay broadcast, at least "
                           "(fewer lanes for smaller pieces; at least 32 KiB where pieces exceed "
                           "1 MiB); the same on every rank", 1);
const IntParam kStepsParam("SYMCOMM_COLL_RELAY_STEPS", "8",
                           "chunks per lane of a member's piece in a relay broadcast, at most "
                           "(fewer where chunks would be under 32 KiB, more where over "
                           "SYMCOMM_COLL_RELAY_CHUNK); the same on every rank", 1);
const SizeParam kChunk("SYMCOMM_COLL_RELAY_CHUNK", "256K",
                       "most bytes of a relay broadcast's chunk (the unit a member forwards and "
                       "signals), at least 16; the same on every rank", 16);


constexpr auto kernel_of = [](auto) { return relay_kernel; };

constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"relay", "a kernel in which members forward pieces of the message"};
  d.ops = op_bit(CollOp::Broadcast);
  d.in_place_recv = true;
  d.max_team = kMaxTeam;
  d.state = CollState::Counters;
  return d;
}();

class RelayAlgorithm final : public CollAlgorithm {
 public:
  RelayAlgorithm() : CollAlgorithm(kDescriptor) {}

  // Every member's recv (symmetric or registered: the descriptor) is 16-byte aligned, the
  // same on every member (aligned_alike, so all decide the same). A query takes it to be.
  Verdict own_conditions(const CollArgs& a, const CollContext& ctx) const override {
    if (a.query || (ctx.aligned_alike(a.recv, 16) && reinterpret_cast<uintptr_t>(a.recv) % 16 == 0))
      return Verdict::yes();
    return Verdict::no("the receive buffer must be 16-byte aligned on every member: the members "
                       "write it in place");
  }

  std::unique_ptr<AlgorithmState> make_state(CollContext& ctx) override {
    if (ctx.space() != symcommSpaceCuda) return nullptr;
    auto s = std::make_unique<CounterState>();
    s->resident = ctx.fewest_across_ranks(resident_blocks(kernel_of, kThreads));
    const size_t bytes = counters_bytes(ctx.topology().nranks);
    ctx.place_counters(*s, bytes, bytes);
    return s;
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    CounterState& s = ctx.state<CounterState>(this);
    ctx.check_counters(name());
    const uint64_t len = a.count * a.elem;
    if (len == 0) return;
    const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    if (a.team.size == 1) {
      if (a.send != a.recv)
        SYMCOMM_CUDART(cudaMemcpyAsync(a.recv, a.send, len, cudaMemcpyDeviceToDevice, stream));
      return;
    }
    const int64_t max_lanes = kLanes.get();
    const uint64_t max_chunk = kChunk.get(), lane_bytes = kLaneBytes.get();
    const int64_t steps = kStepsParam.get();
    Plan p{};
    if (make_plan(p, a, s.world, s.area, static_cast<uint64_t>(max_lanes), max_chunk, lane_bytes,
                  static_cast<uint64_t>(steps), s.resident,
                  [&](const void* q, int j) { return ctx.on(a, q, j); }))
      SYMCOMM_CUDART(cudaMemcpyAsync(a.recv, a.send, len, cudaMemcpyDeviceToDevice, stream));
    launch_resident(kernel_of, p, p.lanes + p.self_blocks, kThreads, s.resident, false, a.type,
                    stream, "relay", "lower SYMCOMM_COLL_RELAY_BLOCKS");
  }

};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&relay_kernel));

const Registered<CollAlgorithm, RelayAlgorithm> kRegistered(70);

}  // namespace

}  // namespace symcomm
