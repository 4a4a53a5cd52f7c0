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
// The code between the "relay protocol" markers also runs on the host in
// tests/unit/relay_emulation.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/coll.h"
#include "coll/resident_launch.cuh"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

// BEGIN relay protocol: from here to "END relay protocol", the code also runs on the host in
// tests/unit/relay_emulation.cc (one thread per CUDA thread, the intrinsics emulated).
constexpr int kMaxTeam = 32;
constexpr int kThreads = 512;
static_assert(kThreads >= kMaxTeam, "thread m signals and waits for member m");
constexpr int kMaxLanes = 128;
constexpr uint64_t kMinChunk = 32 << 10;  // bytes of a chunk, at least (unless the lane has less)
constexpr int kSelfBlocks = 32;            // the root's own copy: one block per kSelfPiece
constexpr uint64_t kSelfPiece = 64 << 10;
// The root signals each owner as soon as its chunk is stored where a lane has several rounds
// or pieces are larger than this, else once per round (see "Signals" above).
constexpr uint64_t kEagerPiece = 1 << 20;

enum Counter { kReady = 0, kData = 1, kCalls = 2, kGot = 3, kPut = 4, kCounters = 5 };

// What one call does, by value into the kernel (graph capture keeps it).
struct Plan {
  DeviceComm comm;   // the world view: error record, abort flag, bound
  int n, me, root;   // team size, this rank's team rank, the root's
  int world[kMaxTeam];
  const char* send;  // the root's
  char* recv;        // this rank's
  char* recv_on[kMaxTeam];       // member m's recv, as mapped here
  uint64_t* flags;               // this rank's [kCounters][kMaxLanes][nranks]
  uint64_t* flags_on[kMaxTeam];  // member m's, as mapped here
  uint64_t len;                  // L
  uint64_t piece;                // P
  uint64_t chunk;                // C
  int lanes;
  int self_blocks;               // the root's blocks after the lanes (0 in place, elsewhere)
};

__device__ __forceinline__ uint64_t umin(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Owner k's team rank, and member m's owner index (m is not the root).
__device__ __forceinline__ int member_of(const Plan& p, int k) { return k < p.root ? k : k + 1; }
__device__ __forceinline__ int owner_of(const Plan& p, int m) { return m < p.root ? m : m - 1; }

// Owner k's piece: [lo, hi) of the message.
struct Range {
  uint64_t lo, hi;
};
__device__ __forceinline__ Range piece_of(const Plan& p, int k) {
  const uint64_t lo = static_cast<uint64_t>(k) * p.piece;
  const uint64_t end = lo + p.piece < p.len ? lo + p.piece : p.len;
  return lo < end ? Range{lo, end} : Range{lo, lo};
}
// Chunk c of owner k's piece.
__device__ __forceinline__ Range chunk_of(const Plan& p, int k, uint64_t c) {
  const Range x = piece_of(p, k);
  const uint64_t lo = x.lo + c * p.chunk;
  return {lo, lo + p.chunk < x.hi ? lo + p.chunk : x.hi};
}
// The chunks of owner k's piece in lane b.
__device__ __forceinline__ uint64_t lane_chunks(const Plan& p, int k, int b) {
  const Range x = piece_of(p, k);
  const uint64_t chunks = (x.hi - x.lo + p.chunk - 1) / p.chunk;
  const uint64_t lb = static_cast<uint64_t>(b), lanes = static_cast<uint64_t>(p.lanes);
  return chunks > lb ? (chunks - 1 - lb) / lanes + 1 : 0;
}

__device__ __forceinline__ uint64_t* counter(uint64_t* flags, const Plan& p, Counter kind, int b,
                                             int w) {
  return flags + (static_cast<uint64_t>(kind) * kMaxLanes + static_cast<uint64_t>(b)) *
                     static_cast<uint64_t>(p.comm.nranks) + static_cast<uint64_t>(w);
}

// [lo, hi) of this rank's recv (written by the root, on another GPU) into every other
// owner's: each 16-byte vector loaded once (four in flight per thread), stored n - 2 times;
// the bytes past the last whole vector one by one (only the message's end has them: chunks
// are multiples of 16 bytes and recv is 16-byte aligned).
__device__ __forceinline__ void forward(const Plan& p, uint64_t lo, uint64_t hi) {
  constexpr int kUnroll = 4;
  const uint64_t nt = blockDim.x, t = threadIdx.x;
  const uint64_t vecs = (hi - lo) / 16;
  const uint4* src = reinterpret_cast<const uint4*>(p.recv + lo);
  uint64_t i = t;
  for (; i + (kUnroll - 1) * nt < vecs; i += kUnroll * nt) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcg(src + i + u * nt);
    for (int m = 0; m < p.n; ++m) {
      if (m == p.me || m == p.root) continue;
      uint4* dst = reinterpret_cast<uint4*>(p.recv_on[m] + lo);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[i + u * nt] = v[u];
    }
  }
  for (; i < vecs; i += nt) {
    const uint4 v = __ldcg(src + i);
    for (int m = 0; m < p.n; ++m)
      if (m != p.me && m != p.root) reinterpret_cast<uint4*>(p.recv_on[m] + lo)[i] = v;
  }
  for (uint64_t o = lo + vecs * 16 + t; o < hi; o += nt) {
    const unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(p.recv + o));
    for (int m = 0; m < p.n; ++m)
      if (m != p.me && m != p.root) p.recv_on[m][o] = static_cast<char>(v);
  }
}

// Thread m (m < n, m != me): fence, then data = value on member m (see "Ordering"; the
// caller's __syncthreads came first).
__device__ __forceinline__ void signal_data(const Plan& p, int m, uint64_t value) {
  __threadfence_system();
  detail::store_relaxed(counter(p.flags_on[m], p, kData, static_cast<int>(blockIdx.x),
                                p.comm.rank),
                        value);
}

__global__ void __launch_bounds__(kThreads) relay_kernel(const __grid_constant__ Plan p) {
  pdl_begin();
  const int b = static_cast<int>(blockIdx.x);
  if (b >= p.lanes) {  // the root's own copy: slice b - lanes of self_blocks
    const uint64_t per = ((p.len + p.self_blocks - 1) / p.self_blocks + 15) / 16 * 16;
    const uint64_t lo = static_cast<uint64_t>(b - p.lanes) * per;
    if (lo < p.len)
      detail::copy(p.recv + lo, p.send + lo, umin(per, p.len - lo), threadIdx.x, blockDim.x);
    return;
  }
  const bool root = p.me == p.root;
  const int m = static_cast<int>(threadIdx.x);
  const bool peer = m < p.n && m != p.me;  // this thread keeps member m's counters
  const int w = peer ? p.world[m] : 0;
  uint64_t calls = 0, got = 0, put = 0;
  if (peer) {
    calls = *counter(p.flags, p, kCalls, b, w);
    got = *counter(p.flags, p, kGot, b, w);
    put = *counter(p.flags, p, kPut, b, w);
  }
  // Ready: owners are written by the root and by the other owners.
  int rc = 0;
  if (peer) {
    if (!root) detail::store_relaxed(counter(p.flags_on[m], p, kReady, b, p.comm.rank), calls + 1);
    if (m != p.root)
      rc = detail::wait_local(p.comm, counter(p.flags, p, kReady, b, w), symcommCmpGe, calls + 1);
  }
  if (__syncthreads_or(rc)) return;
  const int owners = p.n - 1;
  uint64_t stored = 0;  // chunks this rank stored into member m in this call (thread m)
  if (root) {
    const uint64_t rounds = lane_chunks(p, 0, b);  // piece 0 is the longest
    const bool eager = rounds > 1 || p.piece > kEagerPiece;  // see "Signals" above
    for (uint64_t j = 0; j < rounds; ++j) {
      for (int i = 0; i < owners; ++i) {
        const int k = static_cast<int>((static_cast<uint64_t>(b) + j + i) % owners);
        if (j >= lane_chunks(p, k, b)) continue;
        const Range x = chunk_of(p, k, static_cast<uint64_t>(b) + j * p.lanes);
        detail::copy(p.recv_on[member_of(p, k)] + x.lo, p.send + x.lo, x.hi - x.lo, threadIdx.x,
                     blockDim.x);
        if (eager) {
          __syncthreads();
          if (peer && m == member_of(p, k)) signal_data(p, m, put + ++stored);
        }
      }
      if (!eager) {
        __syncthreads();
        if (peer && j < lane_chunks(p, owner_of(p, m), b)) signal_data(p, m, put + ++stored);
      }
    }
  } else {
    const int k = owner_of(p, p.me);
    const uint64_t mine = lane_chunks(p, k, b);
    for (uint64_t j = 0; j < mine; ++j) {
      if (m == p.root)
        rc = detail::wait_local(p.comm, counter(p.flags, p, kData, b, w), symcommCmpGe,
                                got + j + 1);
      if (__syncthreads_or(rc)) return;
      const Range x = chunk_of(p, k, static_cast<uint64_t>(b) + j * p.lanes);
      forward(p, x.lo, x.hi);
      __syncthreads();
      if (peer && m != p.root) signal_data(p, m, put + ++stored);
    }
    // Every other owner's chunks of this lane.
    if (peer && m != p.root)
      rc = detail::wait_local(p.comm, counter(p.flags, p, kData, b, w), symcommCmpGe,
                              got + lane_chunks(p, owner_of(p, m), b));
    if (__syncthreads_or(rc)) return;
  }
  if (peer) {
    *counter(p.flags, p, kCalls, b, w) = calls + 1;
    *counter(p.flags, p, kPut, b, w) = put + stored;
    if (!root) {  // received: the root's chunks of this rank's piece, an owner's of its own
      const int from = m == p.root ? owner_of(p, p.me) : owner_of(p, m);
      *counter(p.flags, p, kGot, b, w) = got + lane_chunks(p, from, b);
    }
  }
}

// The shape of a call (host code): pieces, chunks and lanes into `p` (whose n and len are
// set; n >= 2), from L, n, the parameters and `resident` alone, so that every member derives
// the same. `lane_bytes` (SYMCOMM_COLL_RELAY_LANE_BYTES) and `steps` (SYMCOMM_COLL_RELAY_STEPS)
// are at least 1; no more lanes than `resident`, the fewest blocks any member's GPU holds at
// once (CollContext::fewest_across_ranks).
inline void shape_call(Plan& p, uint64_t max_lanes, uint64_t max_chunk, uint64_t lane_bytes,
                       uint64_t steps, int resident) {
  const uint64_t owners = static_cast<uint64_t>(p.n - 1);
  p.piece = ((p.len + owners - 1) / owners + 15) / 16 * 16;
  // Pieces the root signals chunk by chunk (over kEagerPiece) keep lanes of kMinChunk at
  // least: a fence per owner costs short chunks more than the extra lanes gain.
  if (p.piece > kEagerPiece) lane_bytes = std::max(lane_bytes, kMinChunk);
  max_lanes = std::min<uint64_t>(max_lanes, static_cast<uint64_t>(std::max(resident, 1)));
  const uint64_t lanes = std::min<uint64_t>(max_lanes, (p.piece + lane_bytes - 1) / lane_bytes);
  p.lanes = static_cast<int>(std::max<uint64_t>(lanes, 1));
  // Chunks are at least kMinChunk, unless a lane's whole share of the piece is less: then a
  // lane moves its share as one chunk (more lanes of less each, where lane_bytes asks for
  // them, rather than fewer lanes of kMinChunk).
  const uint64_t share = (p.piece + p.lanes - 1) / p.lanes;
  const uint64_t per =
      std::max(std::min(kMinChunk, share), (p.piece + p.lanes * steps - 1) / (p.lanes * steps));
  p.chunk = std::max<uint64_t>(16, std::min(max_chunk / 16 * 16, (per + 15) / 16 * 16));
  // No lane without a chunk of piece 0 (16-byte chunks can be fewer than the lanes).
  p.lanes = static_cast<int>(std::min<uint64_t>(p.lanes, (p.piece + p.chunk - 1) / p.chunk));
}

// The root's blocks that copy its send into its own recv (`copies`: this rank is the root,
// not in place) into p.self_blocks: one per kSelfPiece, up to kSelfBlocks, and no more than
// the GPU holds beside the lanes (`resident`: the grid must be resident at once). The lanes
// are the same on every member; a root that asked for more would refuse a call its peers
// had already launched. True where none are left: the copy engines then copy before the
// kernel.
inline bool place_own_copy(Plan& p, bool copies, int resident) {
  const uint64_t want = std::min<uint64_t>(kSelfBlocks, (p.len + kSelfPiece - 1) / kSelfPiece);
  const uint64_t spare = static_cast<uint64_t>(std::max(resident - p.lanes, 0));
  p.self_blocks = copies ? static_cast<int>(std::min(want, spare)) : 0;
  return copies && p.self_blocks == 0;
}

// END relay protocol

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

size_t counters_bytes(int nranks) {
  return size_t{kCounters} * kMaxLanes * static_cast<size_t>(nranks) * sizeof(uint64_t);
}

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
    const bool root = a.me == a.root;
    if (a.team.size == 1) {
      if (a.send != a.recv)
        SYMCOMM_CUDART(cudaMemcpyAsync(a.recv, a.send, len, cudaMemcpyDeviceToDevice, stream));
      return;
    }
    const int64_t max_lanes = kLanes.get();
    const uint64_t max_chunk = kChunk.get(), lane_bytes = kLaneBytes.get();
    const int64_t steps = kStepsParam.get();
    Plan p{};
    p.comm = s.world;
    p.n = a.team.size;
    p.me = a.me;
    p.root = a.root;
    p.send = a.send;
    p.recv = a.recv;
    p.len = len;
    p.flags = reinterpret_cast<uint64_t*>(s.area);
    for (int j = 0; j < p.n; ++j) {
      p.world[j] = a.team.world_of(j);
      p.recv_on[j] = j == a.me ? a.recv : ctx.on(a, a.recv, j);
      p.flags_on[j] = reinterpret_cast<uint64_t*>(ctx.on(a, p.flags, j));
    }
    shape_call(p, static_cast<uint64_t>(max_lanes), max_chunk, lane_bytes,
               static_cast<uint64_t>(steps), s.resident);
    if (place_own_copy(p, root && a.send != a.recv, s.resident))
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
