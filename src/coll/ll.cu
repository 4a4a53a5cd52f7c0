// The "ll" algorithm (low-latency packets, NCCL's LL protocol): every collective is one
// kernel whose blocks store 16-byte packets {data0, flag, data1, flag} straight into a buffer
// in each peer's memory, and poll their own memory until the packets they expect carry the
// expected flag. The data is its own signal: no counter, no fence, one crossing of the link
// per message. Half of what crosses is flags, so this is for small messages. GPUs only; the
// code between the "ll protocol" markers also runs on the host in tests/unit/ll_emulation.cc.
//
// Packets. One st.volatile.global.v4.u32 writes a packet. Each 8-byte half {data, flag} is
// single-copy atomic (over NVLink too), the 16 bytes as a whole are not: hence a flag in each
// half. The reader polls with ld.volatile.global.v4.u32 until both flags are the one it
// expects; each half is then the new one. 8 payload bytes per packet.
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
// rma/reduce.h does), so every rank gets bit-identical results. All-reduce is one shot:
// every rank sends its whole buffer to every peer. In place works: block b reads and writes
// only its own slices, each 8 bytes by the same thread (read to send, read to reduce, write).
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
#include <cstring>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "coll/coll.h"
#include "coll/resident_launch.cuh"
#include "rma/reduce.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

// The memory operations of the protocol (the emulation has its own). Generic addresses of
// global memory are global addresses, as NCCL's LL code assumes too.
__device__ __forceinline__ void store_packet(uint4* at, uint64_t data, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
               :
               : "l"(at), "r"(static_cast<uint32_t>(data)), "r"(flag),
                 "r"(static_cast<uint32_t>(data >> 32)), "r"(flag)
               : "memory");
}

__device__ __forceinline__ uint4 load_packet(const uint4* at) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}

__device__ __forceinline__ void poll_pause() {}  // the emulation yields here

// BEGIN ll protocol: from here to "END ll protocol", the code also runs on the host in
// tests/unit/ll_emulation.cc (one thread per CUDA thread, packets emulated as two 8-byte
// atomics).
constexpr int kMaxTeam = 32;
constexpr int kThreads = 512;                              // per block; packets per slice
constexpr int kMaxBlocks = 16;
constexpr uint64_t kSlice = uint64_t{kThreads} * 8;        // payload per block and round
constexpr uint64_t kRound = kSlice * kMaxBlocks;           // payload per pair and round
constexpr uint64_t kRefresh = uint64_t{1} << 20;           // see "Flag wrap"; a power of 2
constexpr uint64_t kSelfPiece = 64 << 10;                  // own part: a block per piece

// What one call moves, by value into the kernel (so that graph capture keeps it).
struct Plan {
  DeviceComm comm;   // the world view: peer windows, error record, abort flag, bound
  const char* send;
  char* recv;
  uint4* packets;    // this rank's area (symmetric): [nranks][2][kMaxBlocks][kThreads]
  uint64_t* seq;     // local: [kMaxBlocks][nranks] rounds done per block and peer
  uint64_t refresh;  // kRefresh (smaller in the emulation, to exercise it)
  int n, me;         // team size, this rank's team rank
  bool reduce;       // receivers reduce red_len bytes from every member
  symcommRedOp_t op;
  int world[kMaxTeam];  // team rank -> world rank
  uint64_t send_off[kMaxTeam], send_len[kMaxTeam];  // bytes for member j: send + send_off[j]
  uint64_t recv_off[kMaxTeam], recv_len[kMaxTeam];  // bytes from member j: recv + recv_off[j]
  uint64_t self_src, self_dst, self_len;            // this rank's own part (copied)
  uint64_t red_len, red_own, red_out;  // reductions: length, own data at send + red_own,
                                       // result at recv + red_out
};

__host__ __device__ inline uint64_t lmin(uint64_t a, uint64_t b) { return a < b ? a : b; }

// The rounds of a pair and the blocks it uses, from the bytes each way.
struct Shape {
  uint64_t rounds;
  int blocks;
};

__host__ __device__ inline Shape pair_shape(uint64_t out, uint64_t in) {
  const uint64_t len = out > in ? out : in;
  if (len == 0) return {0, 0};
  const uint64_t rounds = (len + kRound - 1) / kRound;
  return {rounds, rounds > 1 ? kMaxBlocks : static_cast<int>((len + kSlice - 1) / kSlice)};
}

__host__ __device__ inline Shape pair_shape(const Plan& p, int j) {
  return j == p.me ? Shape{0, 0} : pair_shape(p.send_len[j], p.recv_len[j]);
}

__host__ __device__ inline bool active(const Plan& p, int j, uint64_t r, int b) {
  const Shape s = pair_shape(p, j);
  return b < s.blocks && r < s.rounds;
}

// Where block b's slice of round r starts in a message, and its bytes in one of `len`.
__host__ __device__ inline uint64_t slice_offset(uint64_t r, int b) {
  return r * kRound + static_cast<uint64_t>(b) * kSlice;
}

__host__ __device__ inline uint64_t slice_bytes(uint64_t len, uint64_t r, int b) {
  const uint64_t lo = slice_offset(r, b);
  return lo < len ? lmin(kSlice, len - lo) : 0;
}

// Packets that carry `bytes` bytes: one per 8, or one token for none.
__host__ __device__ inline uint64_t packets_for(uint64_t bytes) {
  return bytes == 0 ? 1 : (bytes + 7) / 8;
}

// The payload bytes of packet k of a slice of `bytes` bytes (0 for a token or beyond).
__host__ __device__ inline uint64_t packet_bytes(uint64_t bytes, uint64_t k) {
  return 8 * k < bytes ? lmin(8, bytes - 8 * k) : 0;
}

__host__ __device__ inline uint32_t flag_of(uint64_t g) { return static_cast<uint32_t>(g + 1); }

// Block b's packets of round g from sender world rank s, in `area` (a rank's packets).
__host__ __device__ inline uint4* slot(uint4* area, int s, uint64_t g, int b) {
  const uint64_t half = static_cast<uint64_t>(s) * 2 + g % 2;
  return area + (half * kMaxBlocks + static_cast<uint64_t>(b)) * kThreads;
}

// Rounds block b has done with world rank w.
__host__ __device__ inline uint64_t* seq_of(const Plan& p, int b, int w) {
  return p.seq + static_cast<uint64_t>(b) * static_cast<uint64_t>(p.comm.nranks) +
         static_cast<uint64_t>(w);
}

// 1 to 8 bytes at any address, little-endian in a word, with the widest accesses that the
// address and the length allow (user buffers have any alignment; elements never straddle
// packets, since slices start at multiples of 8 bytes and element sizes divide 8).
template <typename W>
__host__ __device__ inline uint64_t load_as(const char* p, uint64_t n) {
  uint64_t v = 0;
  for (uint64_t i = 0; i < n / sizeof(W); ++i)
    v |= static_cast<uint64_t>(reinterpret_cast<const W*>(p)[i]) << (8 * sizeof(W) * i);
  return v;
}

template <typename W>
__host__ __device__ inline void store_as(char* p, uint64_t v, uint64_t n) {
  for (uint64_t i = 0; i < n / sizeof(W); ++i)
    reinterpret_cast<W*>(p)[i] = static_cast<W>(v >> (8 * sizeof(W) * i));
}

__host__ __device__ inline uint64_t load_bytes(const char* p, uint64_t n) {
  const uint64_t mix = (reinterpret_cast<uintptr_t>(p) | n) & 7;
  if (mix == 0) return load_as<uint64_t>(p, n);
  if (mix % 4 == 0) return load_as<uint32_t>(p, n);
  if (mix % 2 == 0) return load_as<uint16_t>(p, n);
  return load_as<uint8_t>(p, n);
}

__host__ __device__ inline void store_bytes(char* p, uint64_t v, uint64_t n) {
  const uint64_t mix = (reinterpret_cast<uintptr_t>(p) | n) & 7;
  if (mix == 0) store_as<uint64_t>(p, v, n);
  else if (mix % 4 == 0) store_as<uint32_t>(p, v, n);
  else if (mix % 2 == 0) store_as<uint16_t>(p, v, n);
  else store_as<uint8_t>(p, v, n);
}

// Polls the packet at `at` (this rank's memory) until both its flags are `flag`, and puts
// its payload in *data. Like detail::wait_local, it looks at the clock and the abort flag
// once every kCheckEvery polls; a failure is recorded (observed: the second flag in the high
// word, the first in the low) and returned.
__device__ inline int poll(const Plan& p, const uint4* at, uint32_t flag, uint64_t* data) {
  constexpr uint32_t kCheckEvery = 1024;
  uint4 v = load_packet(at);
  uint64_t start = 0;
  for (uint32_t polls = 1; v.y != flag || v.w != flag; ++polls) {
    if (polls % kCheckEvery == 0) {
      const uint64_t now = detail::global_time_ns();
      if (start == 0) start = now;
      int code = 0;
      if (p.comm.abort_flag != nullptr && *p.comm.abort_flag != 0)
        code = symcommPeerLost;
      else if (p.comm.wait_timeout_ns != 0 && now - start > p.comm.wait_timeout_ns)
        code = symcommTimeout;
      if (code != 0) {
        detail::record_error(p.comm, code, at, symcommCmpEq, flag,
                             (static_cast<uint64_t>(v.w) << 32) | v.y);
        return code;
      }
    }
    poll_pause();
    v = load_packet(at);
  }
  *data = v.x | (static_cast<uint64_t>(v.z) << 32);
  return 0;
}

// Send phase, one peer: the block's slice of round r for member j, into j's memory. A
// refreshing round writes every packet of the slot (see "Flag wrap").
__device__ inline void send_slice(const Plan& p, int j, uint64_t r, int b) {
  const int w = p.world[j];
  const uint64_t g = *seq_of(p, b, w) + r;
  const uint64_t bytes = slice_bytes(p.send_len[j], r, b);
  const uint64_t count = (g & (p.refresh - 1)) < 2 ? kThreads : packets_for(bytes);
  uint4* to = detail::remote(p.comm, slot(p.packets, p.comm.rank, g, b), w);
  for (uint64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const uint64_t nb = packet_bytes(bytes, k);
    const uint64_t v = nb ? load_bytes(p.send + p.send_off[j] + slice_offset(r, b) + 8 * k, nb) : 0;
    store_packet(to + k, v, flag_of(g));
  }
}

// Receive phase of a collective that moves data, one peer: member j's slice of round r,
// written out to recv.
__device__ inline int receive_slice(const Plan& p, int j, uint64_t r, int b) {
  const int w = p.world[j];
  const uint64_t g = *seq_of(p, b, w) + r;
  const uint64_t bytes = slice_bytes(p.recv_len[j], r, b);
  const uint4* from = slot(p.packets, w, g, b);
  for (uint64_t k = threadIdx.x; k < packets_for(bytes); k += blockDim.x) {
    uint64_t v = 0;
    if (const int rc = poll(p, from + k, flag_of(g), &v)) return rc;
    if (const uint64_t nb = packet_bytes(bytes, k))
      store_bytes(p.recv + p.recv_off[j] + slice_offset(r, b) + 8 * k, v, nb);
  }
  return 0;
}

// Member m's 8 bytes at packet k of block b's slice of round r: this rank's own from send,
// a peer's from its packet (`nb` payload bytes, 0 for a token).
__device__ inline int contribution(const Plan& p, int m, uint64_t r, int b, uint64_t k,
                                   uint64_t nb, uint64_t* v) {
  *v = 0;
  if (m == p.me) {
    if (nb) *v = load_bytes(p.send + p.red_own + slice_offset(r, b) + 8 * k, nb);
    return 0;
  }
  const int w = p.world[m];
  const uint64_t g = *seq_of(p, b, w) + r;
  return poll(p, slot(p.packets, w, g, b) + k, flag_of(g), v);
}

// Receive phase of a reduction, every peer at once (all pairs have the same shape): each
// packet's elements combined over the members in team-rank order.
template <typename T>
__device__ inline int reduce_slice(const Plan& p, uint64_t r, int b) {
  using A = typename Accum<T>::type;
  constexpr int kLanes = 8 / sizeof(T);
  const uint64_t bytes = slice_bytes(p.red_len, r, b);
  for (uint64_t k = threadIdx.x; k < packets_for(bytes); k += blockDim.x) {
    const uint64_t nb = packet_bytes(bytes, k);
    uint64_t v = 0;
    if (const int rc = contribution(p, 0, r, b, k, nb, &v)) return rc;
    T x[kLanes];
    memcpy(static_cast<void*>(x), &v, 8);  // (16-bit float types are classes)
    A acc[kLanes];
    for (int i = 0; i < kLanes; ++i) acc[i] = widen(x[i]);
    for (int m = 1; m < p.n; ++m) {
      if (const int rc = contribution(p, m, r, b, k, nb, &v)) return rc;
      memcpy(static_cast<void*>(x), &v, 8);
      for (int i = 0; i < kLanes; ++i) acc[i] = combine(p.op, acc[i], widen(x[i]));
    }
    if (nb == 0) continue;  // a token
    for (int i = 0; i < kLanes; ++i) x[i] = narrow<T>(acc[i]);
    memcpy(&v, x, 8);
    store_bytes(p.recv + p.red_out + slice_offset(r, b) + 8 * k, v, nb);
  }
  return 0;
}

// This rank's own part, in a piece per block of the grid.
__device__ inline void copy_own_part(const Plan& p) {
  if (p.self_len == 0) return;
  const uint64_t piece = (p.self_len + gridDim.x - 1) / gridDim.x / 16 * 16 + 16;
  const uint64_t off = static_cast<uint64_t>(blockIdx.x) * piece;
  if (off < p.self_len)
    detail::copy(p.recv + p.self_dst + off, p.send + p.self_src + off,
                 lmin(piece, p.self_len - off), threadIdx.x, blockDim.x);
}

// Block b: every round of every pair that uses it (send phase to every peer, from the
// next one on, so that peers are not all written at once; receive phase from every peer;
// a barrier), the own part once the first round is sent, then the counters.
template <typename T>
__global__ void __launch_bounds__(kThreads) ll_kernel(const __grid_constant__ Plan p) {
  pdl_begin();
  const int b = static_cast<int>(blockIdx.x);
  uint64_t rounds = 0;
  for (int j = 0; j < p.n; ++j) {
    const Shape s = pair_shape(p, j);
    if (b < s.blocks && s.rounds > rounds) rounds = s.rounds;
  }
  if (rounds == 0) return copy_own_part(p);
  for (uint64_t r = 0; r < rounds; ++r) {
    for (int i = 1; i < p.n; ++i) {
      const int j = (p.me + i) % p.n;
      if (active(p, j, r, b)) send_slice(p, j, r, b);
    }
    if (r == 0) copy_own_part(p);
    int rc = 0;
    if (p.reduce) {
      rc = reduce_slice<T>(p, r, b);
    } else {
      for (int i = 1; i < p.n && rc == 0; ++i) {
        const int j = (p.me - i + p.n) % p.n;
        if (active(p, j, r, b)) rc = receive_slice(p, j, r, b);
      }
    }
    // Every thread's reads of this round are done before any thread sends the next one
    // (see "Reuse"); a failed poll ends the block (its counters no longer matter).
    if (__syncthreads_or(rc)) return;
  }
  for (int j = static_cast<int>(threadIdx.x); j < p.n; j += static_cast<int>(blockDim.x)) {
    const Shape s = pair_shape(p, j);
    if (b < s.blocks) *seq_of(p, b, p.world[j]) += s.rounds;
  }
}

// The grid of a plan: the most blocks a pair uses, or what the own part wants (0: nothing
// to do).
inline int grid_blocks(const Plan& p) {
  int blocks = 0;
  for (int j = 0; j < p.n; ++j) blocks = std::max(blocks, pair_shape(p, j).blocks);
  const uint64_t own = (p.self_len + kSelfPiece - 1) / kSelfPiece;
  return std::max(blocks, static_cast<int>(std::min<uint64_t>(own, kMaxBlocks)));
}

// Fills `p` (whose comm, packets, seq and refresh are set, the rest zero) for the call `a`:
// what this rank sends to and receives from each member, its own part, or the reduction.
// All-to-all-v trusts that each receiver's counts are its senders' (see symcomm.h).
inline void make_plan(Plan& p, const CollArgs& a) {
  const int n = a.team.size;
  p.n = n;
  p.me = a.me;
  p.op = a.redop;
  p.send = a.send;
  p.recv = a.recv;
  for (int j = 0; j < n; ++j) p.world[j] = a.team.world_of(j);
  const uint64_t block = a.count * a.elem;
  switch (a.op) {
    case CollOp::AllToAllv:
      alltoallv_parts(p, a);
      return;
    case CollOp::Broadcast:  // non-roots send tokens back to the root: see "Rounds"
      for (int j = 0; j < n; ++j) {
        p.send_len[j] = a.me == a.root && j != a.me ? block : 0;
        p.recv_len[j] = j == a.root && j != a.me ? block : 0;
      }
      p.self_len = a.me == a.root && a.send != a.recv ? block : 0;
      return;
    case CollOp::AllGather:
    case CollOp::AllToAll: {
      const bool all = a.op == CollOp::AllToAll;
      for (int j = 0; j < n; ++j) {
        p.send_off[j] = all ? j * block : 0;
        p.send_len[j] = p.recv_len[j] = j == a.me ? 0 : block;
        p.recv_off[j] = j * block;
      }
      p.self_src = all ? a.me * block : 0;
      p.self_dst = a.me * block;
      p.self_len = a.send == a.recv + p.self_dst ? 0 : block;  // in-place all-gather
      return;
    }
    case CollOp::ReduceScatter:
    case CollOp::AllReduce: {
      const bool scatter = a.op == CollOp::ReduceScatter;
      p.red_own = scatter ? a.me * block : 0;
      if (n == 1) {  // nothing to combine: a copy
        p.self_src = p.red_own;
        p.self_len = a.send + p.red_own == a.recv ? 0 : block;
        return;
      }
      p.reduce = true;
      p.red_len = block;
      for (int j = 0; j < n; ++j) {
        p.send_off[j] = scatter ? j * block : 0;
        p.send_len[j] = p.recv_len[j] = j == a.me ? 0 : block;
      }
      return;
    }
  }
}
// END ll protocol

// A rank's area: the packets, then the counters.
size_t packets_bytes(int nranks) {
  return static_cast<size_t>(nranks) * 2 * kMaxBlocks * kThreads * sizeof(uint4);
}
size_t seq_bytes(int nranks) { return static_cast<size_t>(nranks) * kMaxBlocks * sizeof(uint64_t); }

struct LlState final : CounterState {};

// The kernel instance for element type T (resident_launch.cuh).
constexpr auto kernel_of = [](auto zero) { return ll_kernel<decltype(zero)>; };

// All-to-all-v with counts on the host only: it sizes its rounds from them.
constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"ll", "kernels storing low-latency packets into the peers"};
  d.max_team = kMaxTeam;
  d.state = CollState::Counters;
  return d;
}();

class LlAlgorithm final : public CollAlgorithm {
 public:
  LlAlgorithm() : CollAlgorithm(kDescriptor) {}

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
    s->resident = ctx.fewest_across_ranks(resident_blocks(kernel_of, kThreads));
    const size_t bytes = packets_bytes(nranks) + seq_bytes(nranks);
    ctx.place_counters(*s, bytes, bytes);  // flags 0 (never expected first), counters 0
    return s;
  }

  void run(const CollArgs& a, CollContext& ctx) override {
    LlState& s = ctx.state<LlState>(this);
    ctx.check_counters(name());
    Plan p{};
    p.comm = s.world;
    p.packets = reinterpret_cast<uint4*>(s.area);
    p.seq = reinterpret_cast<uint64_t*>(s.area + packets_bytes(s.world.nranks));
    p.refresh = kRefresh;
    make_plan(p, a);
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
