// The "twoshot" algorithm: all-reduce in two shots, reduce-scatter in the first alone, by
// loads from and stores into the peers' memory straight from the kernel: no rings, no
// packets, no copy engine.
//
// Segments. The n members cut the message into n segments (an all-reduce's buffer into
// n pieces of ceil(count / n) elements rounded up to 16 bytes, the last shorter or empty; a
// reduce-scatter's send into its n blocks). Member s owns segment s:
//   shot 1: it reads segment s of every member's contribution, combines them in team-rank
//     order (16-bit floats in float, as rma/reduce.h does: every rank gets bit-identical
//     results) and writes the result to its recv;
//   shot 2 (all-reduce): it also stores the result into every peer's copy of segment s.
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
// The code between the "twoshot protocol" markers also runs on the host in
// tests/unit/twoshot_emulation.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "base/cuda_runtime_check.h"
#include "base/kernel_load.h"
#include "base/log.h"
#include "base/param.h"
#include "coll/coll.h"
#include "coll/resident_launch.cuh"
#include "rma/reduce.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

const SizeParam kStageBytes("SYMCOMM_COLL_TWOSHOT_BYTES", "8M",
                            "symmetric staging memory per rank of the twoshot collectives, for "
                            "buffers that are not symmetric (twice this; at most 1/16 of "
                            "SYMCOMM_HEAP_MAX is used)");
// BEGIN twoshot protocol: from here to "END twoshot protocol", the code also runs on the host
// in tests/unit/twoshot_emulation.cc (one thread per CUDA thread, the intrinsics and
// symcomm's device helpers emulated there).
constexpr int kMaxTeam = 32;
constexpr int kThreads = 512;
static_assert(kThreads >= kMaxTeam, "exchange(): thread m signals and waits for member m");
constexpr int kMaxBlocks = 128;
constexpr uint64_t kMinSlice = 8 << 10;  // bytes of a segment's round per block, at least
constexpr int kBatch = 8;                // contributions loaded before they are combined

enum Flag { kReady = 0, kDone = 1, kSeq = 2 };

// What one call does, by value into the kernel (graph capture keeps it).
struct Plan {
  DeviceComm comm;  // the world view: error record, abort flag, bound
  int n, me;
  bool all;         // all-reduce (two shots), else reduce-scatter
  bool in_staged, out_staged;
  bool recv_vec;     // this rank's result may be stored in 16-byte vectors
  symcommRedOp_t op;
  int world[kMaxTeam];
  const char* send;  // this rank's
  char* recv;
  char* stage_in;    // this rank's areas
  char* stage_out;
  uint64_t* flags;   // this rank's [3][kMaxBlocks][nranks]
  uint64_t seg;      // segment stride: segment s starts at s * seg of send (and of recv,
                     // all-reduce)
  uint64_t len[kMaxTeam];  // segment lengths
  uint64_t span;     // S: bytes per segment and round
  uint64_t slice;    // sl: bytes per block of a segment's round
  uint64_t rounds;
  const char* in_base[kMaxTeam];  // member m's send, or its stage_in, as mapped here
  char* out_base[kMaxTeam];       // member m's recv, or its stage_out (all-reduce)
  uint64_t* flags_on[kMaxTeam];   // member m's flags, as mapped here
};

// Loads of data that other GPUs wrote (after the acquire of their signal) bypass L1
// (ld.global.cg): nothing is read twice, and no line cached by an earlier round or call can
// be hit. W: uint4 or an unsigned integer type.
template <typename W>
__device__ __forceinline__ W load_shared(const void* at) {
  return __ldcg(static_cast<const W*>(at));
}

// Elements as unsigned integers of their size, stored whole. 16-bit floats go through their
// intrinsics: a byte-wise memcpy out of a __half (PTX: st.global.u8 of the register that
// cvt.rn.f16.f32 wrote, then of its shr by 8) stored a wrong low byte on H200 with nvcc 13.0,
// an f16 3.0 landing as 0x4203 (tests/mp/coll_test.cc caught it in the odd-length tails).
template <int kBytes> struct Bits;
template <> struct Bits<1> { using type = unsigned char; };
template <> struct Bits<2> { using type = unsigned short; };
template <> struct Bits<4> { using type = unsigned int; };
template <> struct Bits<8> { using type = unsigned long long; };
template <typename T>
using BitsOf = typename Bits<sizeof(T)>::type;

template <typename T>
__device__ __forceinline__ BitsOf<T> to_bits(T v) {
  BitsOf<T> b;
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <>
__device__ __forceinline__ unsigned short to_bits<__half>(__half v) { return __half_as_ushort(v); }
template <>
__device__ __forceinline__ unsigned short to_bits<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}

template <typename T>
__device__ __forceinline__ T from_bits(BitsOf<T> b) {
  T v;
  memcpy(static_cast<void*>(&v), &b, sizeof(T));
  return v;
}
template <>
__device__ __forceinline__ __half from_bits<__half>(unsigned short b) { return __ushort_as_half(b); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(unsigned short b) {
  return __ushort_as_bfloat16(b);
}

// Element stores into this rank's recv, which holds elements of T at T-aligned addresses.
template <typename T>
__device__ __forceinline__ void store_element(char* at, T v) {
  *reinterpret_cast<BitsOf<T>*>(at) = to_bits(v);
}

// Copies [0, bytes) from src (16-byte aligned, written by other GPUs) to dst (this rank's).
template <typename T>
__device__ __forceinline__ void copy_in(char* dst, const char* src, uint64_t bytes, bool dst_vec) {
  const uint64_t vec = dst_vec ? bytes / 16 * 16 : 0;
  for (uint64_t o = 16 * threadIdx.x; o < vec; o += 16 * blockDim.x)
    *reinterpret_cast<uint4*>(dst + o) = load_shared<uint4>(src + o);
  for (uint64_t o = vec + sizeof(T) * threadIdx.x; o < bytes; o += sizeof(T) * blockDim.x)
    *reinterpret_cast<BitsOf<T>*>(dst + o) = load_shared<BitsOf<T>>(src + o);
}

__device__ __forceinline__ uint64_t umin(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Block b's part [lo, hi) of segment s in round r (lo >= hi: none).
struct Range {
  uint64_t lo, hi;
};
__device__ __forceinline__ Range slice_of(const Plan& p, int s, uint64_t r, int b) {
  const uint64_t lo = r * p.span + static_cast<uint64_t>(b) * p.slice;
  return {lo, umin(umin(lo + p.slice, (r + 1) * p.span), p.len[s])};
}

__device__ __forceinline__ uint64_t* flag(uint64_t* flags, const Plan& p, Flag kind, int b,
                                          int w) {
  return flags + (static_cast<uint64_t>(kind) * kMaxBlocks + static_cast<uint64_t>(b)) *
                     static_cast<uint64_t>(p.comm.nranks) + static_cast<uint64_t>(w);
}

// Signals `kind` of round r to every member and waits for theirs (see "Ordering"); nonzero
// when a wait failed, in every thread.
__device__ __forceinline__ int exchange(const Plan& p, Flag kind, int b, uint64_t r,
                                        const uint64_t* g0) {
  __syncthreads();
  int rc = 0;
  const int m = static_cast<int>(threadIdx.x);
  if (m < p.n && m != p.me) {
    const uint64_t g = g0[m] + r + 1;
    __threadfence_system();
    detail::store_relaxed(flag(p.flags_on[m], p, kind, b, p.comm.rank), g);
    rc = detail::wait_local(p.comm, flag(p.flags, p, kind, b, p.world[m]), symcommCmpGe, g);
  }
  return __syncthreads_or(rc);
}

// Shot 1 (and 2): this block's slice of this rank's segment, combined over the members,
// to recv and (all-reduce) to every peer. 16-byte vectors, then the tail element by element.
template <typename T>
__device__ __forceinline__ void reduce_slice(const Plan& p, uint64_t r, int b) {
  using A = typename Accum<T>::type;
  constexpr int kLanes = 16 / sizeof(T);
  const Range x = slice_of(p, p.me, r, b);
  if (x.lo >= x.hi) return;
  // Member m's byte at segment offset o is at in_base[m] + in_at(o); peer m's copy of the
  // result goes to out_base[m] + out_at(o), this rank's to mine + o.
  const uint64_t first = r * p.span;  // the round's first segment offset
  auto in_at = [&](uint64_t o) {
    return p.in_staged ? p.me * p.span + (o - first) : p.me * p.seg + o;
  };
  auto out_at = [&](uint64_t o) {
    return p.out_staged ? p.me * p.span + (o - first) : p.me * p.seg + o;
  };
  char* const mine = p.recv + (p.all ? p.me * p.seg : 0);
  const uint64_t vec_end = x.lo + (x.hi - x.lo) / 16 * 16;
  const uint64_t nt = blockDim.x;
  for (uint64_t o = x.lo + 16 * threadIdx.x; o < vec_end; o += 16 * nt) {
    A acc[kLanes];
    for (int m0 = 0; m0 < p.n; m0 += kBatch) {
      uint4 v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        if (m0 + k < p.n) v[k] = load_shared<uint4>(p.in_base[m0 + k] + in_at(o));
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (m0 + k >= p.n) break;
        T e[kLanes];
        memcpy(static_cast<void*>(e), &v[k], 16);  // (16-bit float types are classes)
#pragma unroll
        for (int i = 0; i < kLanes; ++i)
          acc[i] = m0 + k == 0 ? widen(e[i]) : combine(p.op, acc[i], widen(e[i]));
      }
    }
    T e[kLanes];
#pragma unroll
    for (int i = 0; i < kLanes; ++i) e[i] = narrow<T>(acc[i]);
    uint4 out;
    memcpy(&out, e, 16);
    if (p.recv_vec) {
      *reinterpret_cast<uint4*>(mine + o) = out;
    } else {
#pragma unroll
      for (int i = 0; i < kLanes; ++i) store_element(mine + o + i * sizeof(T), e[i]);
    }
    if (p.all)
      for (int i = 1; i < p.n; ++i) {
        const int m = (p.me + i) % p.n;
        *reinterpret_cast<uint4*>(p.out_base[m] + out_at(o)) = out;
      }
  }
  for (uint64_t o = vec_end + sizeof(T) * threadIdx.x; o < x.hi; o += sizeof(T) * nt) {
    A acc = widen(from_bits<T>(load_shared<BitsOf<T>>(p.in_base[0] + in_at(o))));
    for (int m = 1; m < p.n; ++m)
      acc = combine(p.op, acc, widen(from_bits<T>(load_shared<BitsOf<T>>(p.in_base[m] + in_at(o)))));
    const T out = narrow<T>(acc);
    store_element(mine + o, out);
    if (p.all)
      for (int i = 1; i < p.n; ++i) {
        const int m = (p.me + i) % p.n;
        store_element(p.out_base[m] + out_at(o), out);
      }
  }
}

// Block b: every round (see "Blocks"), then the counters.
template <typename T>
__global__ void __launch_bounds__(kThreads) twoshot_kernel(const __grid_constant__ Plan p) {
  pdl_begin();
  const int b = static_cast<int>(blockIdx.x);
  __shared__ uint64_t g0[kMaxTeam];  // rounds done with each member before this call
  for (int m = static_cast<int>(threadIdx.x); m < p.n; m += static_cast<int>(blockDim.x))
    g0[m] = m == p.me ? 0 : *flag(p.flags, p, kSeq, b, p.world[m]);
  for (uint64_t r = 0; r < p.rounds; ++r) {
    if (p.in_staged)
      for (int s = 0; s < p.n; ++s) {
        const Range x = slice_of(p, s, r, b);
        if (x.lo < x.hi)
          detail::copy(p.stage_in + s * p.span + (x.lo - r * p.span), p.send + s * p.seg + x.lo,
                       x.hi - x.lo, threadIdx.x, blockDim.x);
      }
    if (exchange(p, kReady, b, r, g0)) return;
    reduce_slice<T>(p, r, b);
    if (exchange(p, kDone, b, r, g0)) return;
    if (p.all && p.out_staged)
      for (int s = 0; s < p.n; ++s) {
        const Range x = slice_of(p, s, r, b);
        if (s != p.me && x.lo < x.hi)
          copy_in<T>(p.recv + s * p.seg + x.lo, p.stage_out + s * p.span + (x.lo - r * p.span),
                     x.hi - x.lo, p.recv_vec);
      }
  }
  // (The exchanges' barriers ordered every read of g0 before this.)
  for (int m = static_cast<int>(threadIdx.x); m < p.n; m += static_cast<int>(blockDim.x))
    if (m != p.me) *flag(p.flags, p, kSeq, b, p.world[m]) = g0[m] + p.rounds;
}

// 16-byte vectors reach every segment of `p` in place (checked on this rank; the caller
// makes sure every member's copy of p is aligned alike, so that all decide the same).
inline bool aligned(const void* p, uint64_t seg) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && seg % 16 == 0;
}

// The shape of a call (host code): the segments, whether each side is staged, the rounds
// and the blocks' slices, in `p` (whose n, all, send and recv are set); returns the number
// of blocks. `send_direct` / `recv_direct`: the members reach that buffer of every member
// in place, aligned alike; `stage`: bytes of each stage area.
inline uint64_t shape_call(Plan& p, uint64_t count, uint64_t elem, uint64_t block,
                           bool send_direct, bool recv_direct, uint64_t stage,
                           uint64_t max_blocks) {
  const int n = p.n;
  uint64_t longest = 0;
  if (p.all) {
    const uint64_t per = (count + n - 1) / n * elem;
    p.seg = (per + 15) / 16 * 16;
    for (int j = 0; j < n; ++j) {
      const uint64_t lo = std::min<uint64_t>(block, j * p.seg);
      p.len[j] = std::min<uint64_t>(block, lo + p.seg) - lo;
    }
    longest = p.len[0];
  } else {
    p.seg = block;
    for (int j = 0; j < n; ++j) p.len[j] = block;
    longest = block;
  }
  p.in_staged = !(send_direct && aligned(p.send, p.seg));
  p.out_staged = p.all && !(recv_direct && aligned(p.recv, p.seg));
  const bool staged = p.in_staged || p.out_staged;
  p.recv_vec = aligned(p.recv, p.all ? p.seg : 16);
  p.span = staged ? stage / static_cast<uint64_t>(n) / 16 * 16 : (longest + 15) / 16 * 16;
  p.rounds = (longest + p.span - 1) / p.span;
  const uint64_t round = std::min(p.span, (longest + 15) / 16 * 16);
  const uint64_t blocks = std::min<uint64_t>(max_blocks, (round + kMinSlice - 1) / kMinSlice);
  p.slice = ((round + blocks - 1) / blocks + 15) / 16 * 16;
  return blocks;
}

// END twoshot protocol

// 4 ranks: 128 blocks took 3% less time than 64 for all-reduces of 16-64 MiB, the same
// below (bench/results/h200x4/coll_twoshot_b128_ccbbbf9.jsonl against coll_fa9542c_reductions).
// 192 and 256 (kMaxBlocks raised for the run) were no faster from 16 MiB to 1 GiB, and 7%
// slower for reduce-scatters of 1 GiB (bench/results/h200x4/twoshot_blocks_5bf03ca.txt).
const IntParam kBlocks("SYMCOMM_COLL_TWOSHOT_BLOCKS", "128",
                       "most blocks of a twoshot collective (1 per 8 KiB of a segment's "
                       "round), 1 to 128; the same on every rank", 1, kMaxBlocks);

size_t flags_bytes(int nranks) {
  return size_t{3} * kMaxBlocks * static_cast<size_t>(nranks) * sizeof(uint64_t);
}

struct TwoshotState final : CounterState {  // area: flags, stage_in, stage_out
  uint64_t stage = 0;  // bytes of each stage area
};

constexpr auto kernel_of = [](auto zero) { return twoshot_kernel<decltype(zero)>; };


constexpr CollDescriptor kDescriptor = [] {
  CollDescriptor d{"twoshot", "kernels that load from and store into the peers' buffers"};
  d.ops = op_bit(CollOp::AllReduce) | op_bit(CollOp::ReduceScatter);
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
    const bool all = a.op == CollOp::AllReduce;
    const uint64_t block = a.count * a.elem;  // all-reduce: the buffer; else a segment
    if (block == 0) return;
    const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    if (n == 1) {  // nothing to combine: a copy
      if (a.send != a.recv)
        SYMCOMM_CUDART(cudaMemcpyAsync(a.recv, a.send, block, cudaMemcpyDeviceToDevice, stream));
      return;
    }
    const int64_t max_blocks = kBlocks.get();
    Plan p{};
    p.comm = s.world;
    p.n = n;
    p.me = a.me;
    p.all = all;
    p.op = a.redop;
    p.send = a.send;
    p.recv = a.recv;
    p.flags = reinterpret_cast<uint64_t*>(s.area);
    p.stage_in = s.area + flags_bytes(s.world.nranks);
    p.stage_out = p.stage_in + s.stage;
    for (int j = 0; j < n; ++j) p.world[j] = a.team.world_of(j);
    const uint64_t send_bytes = all ? block : block * static_cast<uint64_t>(n);
    // In place only where every member decides alike: addressable, and (a registered buffer
    // may start at different addresses on different ranks) aligned alike.
    const bool send_direct =
        ctx.addressable(a.send, send_bytes) && ctx.aligned_alike(a.send, 16);
    const bool recv_direct = ctx.addressable(a.recv, block) && ctx.aligned_alike(a.recv, 16);
    // No more blocks than every member's GPU holds at once (the same figure on every member).
    const uint64_t most = static_cast<uint64_t>(std::min<int64_t>(max_blocks, s.resident));
    const uint64_t blocks = shape_call(p, a.count, a.elem, block, send_direct, recv_direct,
                                       s.stage, most);
    for (int j = 0; j < n; ++j) {
      p.in_base[j] = p.in_staged ? ctx.on(a, p.stage_in, j) : ctx.on(a, a.send, j);
      p.out_base[j] = p.out_staged ? ctx.on(a, p.stage_out, j)
                                   : (all ? ctx.on(a, a.recv, j) : nullptr);
      p.flags_on[j] = reinterpret_cast<uint64_t*>(ctx.on(a, p.flags, j));
    }
    launch_resident(kernel_of, p, static_cast<int>(blocks), kThreads, s.resident, true, a.type,
                    stream, "twoshot", "lower SYMCOMM_COLL_TWOSHOT_BLOCKS");
  }
};

// Every kernel of this file, loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&twoshot_kernel<uint8_t>));

const Registered<CollAlgorithm, TwoshotAlgorithm> kRegistered(50);

}  // namespace

}  // namespace symcomm
