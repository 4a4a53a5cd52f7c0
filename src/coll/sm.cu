// The "sm" algorithm: every collective is one kernel (two for a large all-reduce or
// broadcast) whose blocks move the data with SM loads and
// stores through per-pair channels. GPUs only; the code between the "sm protocol" markers
// also runs on the host in tests/unit/sm_emulation.cc.
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
#include "coll/sm_plan.h"
#include "rma/reduce.h"
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

// BEGIN sm protocol: from here to "END sm protocol", the code also runs on the host in
// tests/unit/sm_emulation.cc (one thread per block, CUDA's intrinsics emulated).
constexpr int kMaxTeam = 32;
constexpr int kDepth = 4;
constexpr int kThreads = 512;
// Blocks that copy this rank's own part (its block of an all-to-all, of an all-gather): one
// per kSelfPiece, at most kSelfBlocks. One block copies some 50 GB/s, so the 1 MiB pieces of
// before made the own part the slowest of a 2 MiB all-to-all on 2 ranks (one block, 1 MiB:
// 23 us where the peers' halves took 12). With counts on the device (sizes unknown on the
// host) kCountsSelfBlocks, each of which also reads the headers.
constexpr int kSelfBlocks = 32;
constexpr uint64_t kSelfPiece = 64 << 10;
constexpr int kCountsSelfBlocks = 8;
using sm::ChunkPlan;
using sm::channels_for;
using sm::channels_that_fit;
using sm::chunk_plan;
using sm::kChannels;

// What one call moves, by value into the kernel (so that graph capture keeps it).
struct Plan {
  DeviceComm comm;        // the world view: peer windows, error record, abort flag, bound
  const char* send;
  char* recv;
  // This rank's area (symmetric): [nranks][kChannels] words each, then the rings.
  uint64_t* posted;       // written by sender s at [s]
  uint64_t* acked;        // written by receiver r at [r]
  uint64_t* sent;         // local: chunks sent to r, at [r]
  uint64_t* consumed;     // local: chunks consumed from s, at [s]
  uint64_t* done;         // local, [kChannels]: sender blocks of this channel that finished
  uint64_t* expect;       // local, [kChannels]: what `done` reaches when they all have
  uint64_t* reduced;      // local, [kChannels][kDepth]: reducing blocks done with a chunk
  char* ring;             // [nranks][kChannels][kDepth] slots of `slot` bytes, by sender
  uint64_t slot;
  int n, me;              // team size, this rank's team rank
  int max_channels;       // channels per pair at most: channels_for(n, SYMCOMM_COLL_SM_BLOCKS),
  int max_channels_large; // or for messages from large_from bytes, SYMCOMM_COLL_SM_BLOCKS_LARGE
  uint64_t large_from;
  int channels;           // the most channels any pair of this call uses (grid sizing)
  int self_blocks;        // blocks that copy this rank's own part
  int red_blocks;         // reductions: blocks per channel
  bool reduce;            // receivers reduce (all incoming messages have red_len bytes)
  bool in_place;          // reductions: recv is send, so wait for this rank's senders
  symcommRedOp_t op;
  int world[kMaxTeam];    // team rank -> world rank
  uint64_t send_off[kMaxTeam], send_len[kMaxTeam];  // bytes for member j: send + send_off[j]
  uint64_t recv_off[kMaxTeam], recv_len[kMaxTeam];  // bytes from member j: recv + recv_off[j]
  uint64_t self_src, self_dst, self_len;            // this rank's own part (data movement)
  uint64_t red_len, red_own, red_out;  // reductions: length, own data at send + red_own,
                                       // result at recv + red_out
  // All-to-all-v with counts in device memory (then the lengths and offsets above are not
  // used; see the "Counts on the device" section): elements per member and their send
  // offsets; what each member sent here and where its block starts (both written); recv's
  // capacity in elements; bytes per element.
  const uint64_t* dev_send_counts;
  const uint64_t* dev_send_displs;
  uint64_t* dev_recv_counts;
  uint64_t* dev_recv_displs;
  uint64_t capacity, elem;
  // This rank's area, local: blocks that have read the headers, kCallWeight per call.
  uint64_t* dc_readers;
  int blocks;             // the grid (grid_blocks)
};

// How a message of `len` bytes between two members travels: both sides derive it from len.
// Large messages use more channels (more blocks fill the links better; fewer keep chunks
// large for mid sizes).
SYMCOMM_SM_HD inline ChunkPlan pair_plan(const Plan& p, uint64_t len) {
  return chunk_plan(len, p.slot, len >= p.large_from ? p.max_channels_large : p.max_channels);
}

// What this rank sends to member j or receives from it: `len` bytes at `off` in send or
// recv, after a header of `head` bytes (counts on the device: see below) that travels first
// in the same chunks, as if the message were head + len bytes long.
struct Transfer {
  uint64_t len, off;
  bool keep;          // receiving: copy the bytes out (false: drop them)
  uint64_t head;      // 0, or kHead: the first chunk starts with the count
  uint64_t count;     // sending with a header: the count it carries
  uint64_t hold;      // receiving: acknowledge chunk 0 only once dc_readers reaches this
};

__device__ __forceinline__ int index(const Plan&, int world, int c) {
  return world * kChannels + c;
}

__device__ __forceinline__ char* slot_of(const Plan& p, char* ring, int sender_world, int c,
                                         uint64_t g) {
  return ring + ((static_cast<uint64_t>(index(p, sender_world, c)) * kDepth) + g % kDepth) * p.slot;
}

// Thread 0 waits; the block learns whether the wait failed.
__device__ __forceinline__ bool block_wait(const Plan& p, const uint64_t* word, uint64_t value) {
  int rc = 0;
  if (threadIdx.x == 0) rc = detail::wait_local(p.comm, word, symcommCmpGe, value);
  return __syncthreads_or(rc) == 0;
}

// Publishes `value` in `word` (a peer's) after everything the block did before: the
// pattern of cooperative groups' grid barrier (bar.sync, then a fence.sc and the store in
// one thread), which is what the device API's put_signal_block uses too.
__device__ __forceinline__ void post(uint64_t* word, uint64_t value) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    detail::store_relaxed(word, value);
  }
}

// Tells a sender that the block has read a slot, which it may now overwrite: a write after
// the block's reads (WAR), not data to publish, so no fence: every read has returned its
// value (to a store that depends on it) before the bar.sync, and the store follows that.
// NCCL's receivers post their step the same way; a fence.sys here would cost 0.6 us on
// every chunk.
__device__ __forceinline__ void acknowledge(uint64_t* word, uint64_t value) {
  __syncthreads();
  if (threadIdx.x == 0) detail::store_relaxed(word, value);
}

// Chunk i of a message (len bytes after a header of `head`) in its slot, thread by thread.
__device__ __forceinline__ void pack_chunk(char* slot, const char* src, const Transfer& t,
                                           uint64_t i, const ChunkPlan& cp) {
  const uint64_t off = i * cp.size, len = min(cp.size, t.head + t.len - off);
  const uint64_t skip = i == 0 ? t.head : 0;  // header bytes in this chunk
  if (skip != 0 && threadIdx.x == 0) *reinterpret_cast<uint64_t*>(slot) = t.count;
  detail::copy(slot + skip, src + off + skip - t.head, len - skip, threadIdx.x, blockDim.x);
}

__device__ __forceinline__ void unpack_chunk(char* dst, const char* slot, const Transfer& t,
                                             uint64_t i, const ChunkPlan& cp) {
  const uint64_t off = i * cp.size, len = min(cp.size, t.head + t.len - off);
  const uint64_t skip = i == 0 ? t.head : 0;
  detail::copy(dst + off + skip - t.head, slot + skip, len - skip, threadIdx.x, blockDim.x);
}

__device__ void send_to(const Plan& p, const Transfer& t, int j, int c) {
  const ChunkPlan cp = pair_plan(p, t.head + t.len);
  if (c >= cp.channels) return;
  const int w = p.world[j], me = p.comm.rank;
  uint64_t* sent = p.sent + index(p, w, c);
  const uint64_t base = *sent;
  uint64_t* posted = detail::remote(p.comm, p.posted + index(p, me, c), w);
  char* ring = detail::remote(p.comm, p.ring, w);
  const char* src = p.send + t.off;
  uint64_t g = base;
  for (uint64_t i = static_cast<uint64_t>(c); i < cp.count; i += static_cast<uint64_t>(cp.channels), ++g) {
    if (g >= kDepth && !block_wait(p, p.acked + index(p, w, c), g + 1 - kDepth)) return;
    pack_chunk(slot_of(p, ring, me, c, g), src, t, i, cp);
    post(posted, g + 1);
  }
  if (threadIdx.x == 0) *sent = g;
  if (p.in_place) {
    __syncthreads();  // every read of send has returned
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(reinterpret_cast<unsigned long long*>(p.done + c), 1ull);
    }
  }
}

__device__ void receive_from(const Plan& p, const Transfer& t, int j, int c) {
  const ChunkPlan cp = pair_plan(p, t.head + t.len);
  if (c >= cp.channels) return;
  const int w = p.world[j], me = p.comm.rank;
  uint64_t* consumed = p.consumed + index(p, w, c);
  const uint64_t base = *consumed;
  uint64_t* acked = detail::remote(p.comm, p.acked + index(p, me, c), w);
  char* dst = p.recv + t.off;
  uint64_t g = base;
  for (uint64_t i = static_cast<uint64_t>(c); i < cp.count; i += static_cast<uint64_t>(cp.channels), ++g) {
    // (A header's chunk, which carries `hold`, was awaited already: see read_counts.)
    if (!(i == 0 && t.hold != 0) && !block_wait(p, p.posted + index(p, w, c), g + 1)) return;
    if (t.keep) unpack_chunk(dst, slot_of(p, p.ring, w, c, g), t, i, cp);
    if (i == 0 && t.hold != 0 && !block_wait(p, p.dc_readers, t.hold)) return;
    acknowledge(acked, g + 1);
  }
  if (threadIdx.x == 0) *consumed = g;
}

// out[e] = op over m < n of from[m][e], in team-rank order (so that every rank computes
// bit-identical results), for the `bytes` bytes of a slice; thread t of nt takes every nt-th
// 16-byte vector when every pointer is 16-byte aligned, every nt-th element otherwise.
template <typename T>
__device__ __forceinline__ void reduce_slice(char* out, const char* const* from, int n,
                                             symcommRedOp_t op, uint64_t bytes, unsigned t,
                                             unsigned nt) {
  using A = typename Accum<T>::type;
  uintptr_t align = reinterpret_cast<uintptr_t>(out) | bytes;
  for (int m = 0; m < n; ++m) align |= reinterpret_cast<uintptr_t>(from[m]);
  if (align % 16 == 0) {
    constexpr int kPer = 16 / sizeof(T);
    const uint64_t vectors = bytes / 16;
    for (uint64_t e = t; e < vectors; e += nt) {
      uint4 v = reinterpret_cast<const uint4*>(from[0])[e];
      A acc[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[i] = widen(reinterpret_cast<const T*>(&v)[i]);
      for (int m = 1; m < n; ++m) {
        v = reinterpret_cast<const uint4*>(from[m])[e];
#pragma unroll
        for (int i = 0; i < kPer; ++i)
          acc[i] = combine(op, acc[i], widen(reinterpret_cast<const T*>(&v)[i]));
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i) reinterpret_cast<T*>(&v)[i] = narrow<T>(acc[i]);
      reinterpret_cast<uint4*>(out)[e] = v;
    }
    return;
  }
  const uint64_t count = bytes / sizeof(T);
  for (uint64_t e = t; e < count; e += nt) {
    A acc = widen(reinterpret_cast<const T*>(from[0])[e]);
    for (int m = 1; m < n; ++m) acc = combine(op, acc, widen(reinterpret_cast<const T*>(from[m])[e]));
    reinterpret_cast<T*>(out)[e] = narrow<T>(acc);
  }
}

// Channel c's chunks of every peer, reduced with this rank's own data, by p.red_blocks
// blocks: block r of them takes slice r of every chunk. Thread t looks after members t,
// t + blockDim, ... (one each, as teams have at most 32). A chunk's slots are acknowledged
// once every block of the channel has read its slice: each block counts itself in
// reduced[c][k % kDepth] (chunk k + kDepth cannot arrive before chunk k is acknowledged, so
// the counter serves one chunk at a time), and the block that completes the count resets
// it, acknowledges the chunk to every peer and, after the call's last chunk, advances the
// channel's persistent counters, which every block of the channel has read by then.
template <typename T>
__device__ void reduce_channel(const Plan& p, int c, int r) {
  const ChunkPlan cp = pair_plan(p, p.red_len);
  if (c >= cp.channels) return;
  __shared__ uint64_t base[kMaxTeam];
  __shared__ const char* from[kMaxTeam];
  __shared__ bool last;
  const int t = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  for (int m = t; m < p.n; m += nt) base[m] = m == p.me ? 0 : p.consumed[index(p, p.world[m], c)];
  const uint64_t expect = p.expect[c] + static_cast<uint64_t>(p.n - 1);
  // recv is send: write nothing before this rank's senders of channel c (one per peer) read
  // their chunks, which are exactly the chunks this channel writes.
  if (p.in_place && !block_wait(p, p.done + c, expect)) return;
  __syncthreads();
  const uint64_t slice = (cp.size + p.red_blocks - 1) / p.red_blocks / 16 * 16 + 16;
  uint64_t k = 0;
  for (uint64_t i = static_cast<uint64_t>(c); i < cp.count; i += static_cast<uint64_t>(cp.channels), ++k) {
    const uint64_t off = i * cp.size, len = min(cp.size, p.red_len - off);
    const uint64_t lo = min(len, static_cast<uint64_t>(r) * slice), hi = min(len, lo + slice);
    int rc = 0;
    for (int m = t; m < p.n; m += nt) {
      if (m == p.me) {
        from[m] = p.send + p.red_own + off + lo;
      } else {
        const int w = p.world[m];
        rc |= detail::wait_local(p.comm, p.posted + index(p, w, c), symcommCmpGe, base[m] + k + 1);
        from[m] = slot_of(p, p.ring, w, c, base[m] + k) + lo;
      }
    }
    if (__syncthreads_or(rc)) return;
    reduce_slice<T>(p.recv + p.red_out + off + lo, from, p.n, p.op, hi - lo,
                    static_cast<unsigned>(t), static_cast<unsigned>(nt));
    __syncthreads();  // the block's reads of the slots precede the count below
    if (p.red_blocks > 1) {  // (a lone block is the last by itself: no count)
      if (t == 0) {
        unsigned long long* count = reinterpret_cast<unsigned long long*>(
            p.reduced + static_cast<uint64_t>(c) * kDepth + k % kDepth);
        __threadfence();
        last = atomicAdd(count, 1ull) + 1 == static_cast<unsigned long long>(p.red_blocks);
        if (last) atomicExch(count, 0ull);
      }
      __syncthreads();
      if (!last) continue;
    }
    const bool final_chunk = i + static_cast<uint64_t>(cp.channels) >= cp.count;
    for (int m = t; m < p.n; m += nt)  // no fence: see acknowledge()
      if (m != p.me) {
        detail::store_relaxed(detail::remote(p.comm, p.acked + index(p, p.comm.rank, c), p.world[m]),
                              base[m] + k + 1);
        if (final_chunk) p.consumed[index(p, p.world[m], c)] = base[m] + k + 1;
      }
    if (final_chunk && p.in_place && t == 0) p.expect[c] = expect;
  }
}

// This rank's own part, piece `part` of self_blocks: len bytes from send + src to recv + dst.
__device__ void copy_own(const Plan& p, uint64_t src, uint64_t dst, uint64_t len, int part) {
  const uint64_t piece = (len + p.self_blocks - 1) / p.self_blocks / 16 * 16 + 16;
  const uint64_t off = static_cast<uint64_t>(part) * piece;
  if (off < len)
    detail::copy(p.recv + dst + off, p.send + src + off, min(piece, len - off), threadIdx.x,
                 blockDim.x);
}

// ---- Counts on the device (all-to-all-v for MoE routing) ----------------------------------
// One kernel, nothing known on the host. A message starts with a header of kHead bytes, the
// count of elements, in its first chunk (on channel 0), so a pair's chunk plan is that of
// kHead + bytes: the sender knows it, and the receiver learns it from the header. Where a
// block lands in recv is the sum of the earlier members' counts, so every receiving block
// (and every block of the own part) reads the headers of members 0 .. j itself, one thread
// each, from the ring: member m's is in the slot of chunk consumed[m][0] of channel 0, once
// posted[m][0] passes it.
//
// Those reads must happen before the block that receives channel 0 from m acknowledges that
// chunk (the sender may then overwrite the slot) and advances consumed[m][0]. So each
// reading block, once it has read, adds 1 to dc_readers, and the last own-part block adds
// kCallWeight minus the number of readers as well: every call raises dc_readers by exactly
// kCallWeight, and a channel-0 receiver that reads dc_readers = v before it adds its own 1
// waits for (v / kCallWeight + 1) x kCallWeight before it acknowledges chunk 0. Nothing is
// reset between calls; a reader reads the slots before it counts itself, and the header
// chunks do not wait for any acknowledgement of this call: no cycle. Like every sm
// collective, these calls must be stream-ordered on each rank.
//
// A block from member j that does not fit in the capacity is dropped whole (its chunks are
// still received and acknowledged, so the counters stay in step).
constexpr uint64_t kHead = 16;
constexpr uint64_t kCallWeight = uint64_t{1} << 20;  // more than any grid's blocks

// Waits for the headers of members 0 .. j (thread m for member m; this rank's own count is
// in its send counts); what member j's block holds and where it lands, and (for `last`,
// the last own-part block) the complement of the call's readers. False if a wait failed.
__device__ bool read_counts(const Plan& p, int j, bool last, Transfer* t) {
  __shared__ uint64_t count[kMaxTeam];
  int rc = 0;
  for (int m = static_cast<int>(threadIdx.x); m <= j; m += static_cast<int>(blockDim.x)) {
    if (m == p.me) {
      count[m] = p.dev_send_counts[m];
      continue;
    }
    const int w = p.world[m];
    const uint64_t g = p.consumed[index(p, w, 0)];
    rc |= detail::wait_local(p.comm, p.posted + index(p, w, 0), symcommCmpGe, g + 1);
    count[m] = rc == 0 ? *reinterpret_cast<const uint64_t*>(slot_of(p, p.ring, w, 0, g)) : 0;
  }
  if (__syncthreads_or(rc)) return false;  // every read above has returned
  if (threadIdx.x == 0) {
    const uint64_t readers = static_cast<uint64_t>((p.n - 1) * p.channels + p.self_blocks);
    __threadfence();
    atomicAdd(reinterpret_cast<unsigned long long*>(p.dc_readers),
              static_cast<unsigned long long>(last ? 1 + kCallWeight - readers : 1));
  }
  // Where the block lands, and whether it fits. The fit is decided on the same sum with
  // counts past the capacity saturating (the capacity is at most SIZE_MAX / 2 elements), so
  // that counts from the device whose sum wraps around cannot make a block fit.
  const uint64_t past = p.capacity + 1;
  uint64_t at = 0, bound = 0;
  for (int m = 0; m < j; ++m) {
    at += count[m];
    bound = min(bound + min(count[m], past), past);
  }
  const bool fits = count[j] <= p.capacity && bound <= p.capacity - count[j];
  *t = {count[j] * p.elem, at * p.elem, fits, kHead, 0, 0};
  return true;
}

__device__ void device_counts_block(const Plan& p) {
  const int b = static_cast<int>(blockIdx.x), peers = p.n - 1, ch = p.channels;
  Transfer t{};
  if (b < peers * ch) {  // receiving from member j on channel c
    const int j = (p.me - 1 - b / ch + p.n) % p.n, c = b % ch;
    // Channel 0 holds its acknowledgement of chunk 0 for this call's readers.
    __shared__ uint64_t hold;
    if (c == 0 && threadIdx.x == 0)
      hold = (detail::load_acquire(p.dc_readers) / kCallWeight + 1) * kCallWeight;
    if (!read_counts(p, j, false, &t)) return;
    if (c == 0) {
      t.hold = hold;
      if (threadIdx.x == 0) {
        p.dev_recv_counts[j] = t.len / p.elem;
        p.dev_recv_displs[j] = t.off / p.elem;
      }
    }
    return receive_from(p, t, j, c);
  }
  if (b < 2 * peers * ch) {  // sending to member j on channel c
    const int s = b - peers * ch, j = (p.me + 1 + s / ch) % p.n;
    const uint64_t count = p.dev_send_counts[j];
    return send_to(p, {count * p.elem, p.dev_send_displs[j] * p.elem, true, kHead, count, 0}, j,
                   s % ch);
  }
  const int part = b - 2 * peers * ch;  // this rank's own part
  if (!read_counts(p, p.me, part == p.self_blocks - 1, &t)) return;
  if (part == 0 && threadIdx.x == 0) {
    p.dev_recv_counts[p.me] = t.len / p.elem;
    p.dev_recv_displs[p.me] = t.off / p.elem;
  }
  if (t.keep) copy_own(p, p.dev_send_displs[p.me] * p.elem, t.off, t.len, part);
}

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
  const int b = static_cast<int>(blockIdx.x), peers = p.n - 1, ch = p.channels;
  const int receivers = p.reduce ? ch * p.red_blocks : peers * ch;
  if (b < receivers) {
    if (p.reduce) return reduce_channel<T>(p, b / p.red_blocks, b % p.red_blocks);
    const int j = (p.me - 1 - b / ch + p.n) % p.n;
    return receive_from(p, {p.recv_len[j], p.recv_off[j], true, 0, 0, 0}, j, b % ch);
  }
  if (b < receivers + peers * ch) {
    const int j = (p.me + 1 + (b - receivers) / ch) % p.n;
    return send_to(p, {p.send_len[j], p.send_off[j], true, 0, 0, 0}, j, (b - receivers) % ch);
  }
  copy_own(p, p.self_src, p.self_dst, p.self_len, b - receivers - peers * ch);
}

// The channels per pair of a call (p.n set): as many as SYMCOMM_COLL_SM_BLOCKS[_LARGE]
// (`blocks`, `blocks_large`) ask for, as long as a grid fits in `room` blocks, the fewest any
// member's GPU holds (so the cap is the same on every member).
inline void set_channels(Plan& p, int blocks, int blocks_large, int room) {
  const int fit = channels_that_fit(p.n, room, kCountsSelfBlocks);
  p.max_channels = min(channels_for(p.n, blocks), fit);
  p.max_channels_large = min(channels_for(p.n, blocks_large), fit);
}

// Sizes the grid of a plan (filling p.channels and p.self_blocks): receivers, senders, then
// blocks for this rank's own part (one per kSelfPiece, up to kSelfBlocks, and no more than
// leave the grid within `room` blocks, the most the GPU holds at once; at least one). 0:
// nothing to do.
inline int grid_blocks(Plan& p, int room = 1 << 30) {
  if (p.dev_send_counts) {  // lengths unknown here: every channel, every own-part block
    p.channels = p.n > 1 ? std::max(p.max_channels, p.max_channels_large) : 0;
    p.self_blocks = kCountsSelfBlocks;
    return p.blocks = 2 * (p.n - 1) * p.channels + p.self_blocks;
  }
  int ch = 0;
  for (int j = 0; j < p.n; ++j)
    ch = std::max({ch, pair_plan(p, p.send_len[j]).channels,
                   pair_plan(p, p.recv_len[j]).channels});
  p.channels = std::max(ch, pair_plan(p, p.red_len).channels);
  p.self_blocks = static_cast<int>(
      std::min<uint64_t>(kSelfBlocks, (p.self_len + kSelfPiece - 1) / kSelfPiece));
  if (p.channels == 0 && p.self_blocks == 0) return 0;
  // Reductions: blocks per channel so that about as many blocks reduce as move data in the
  // other direction, each taking a slice of at least kMinSlice bytes of every chunk.
  constexpr uint64_t kMinSlice = 2048;
  const uint64_t chunk = std::min(pair_plan(p, p.red_len).size, p.red_len);
  p.red_blocks = static_cast<int>(std::min<uint64_t>(std::max(p.n - 1, 1), std::max<uint64_t>(chunk / kMinSlice, 1)));
  const int receivers = p.reduce ? p.channels * p.red_blocks : (p.n - 1) * p.channels;
  const int others = receivers + (p.n - 1) * p.channels;
  if (p.self_blocks > 1 && others + p.self_blocks > room)
    p.self_blocks = std::max(1, room - others);
  return p.blocks = others + p.self_blocks;
}

// The layout of a rank's area: [nranks][kChannels] words of posted, acked, sent and consumed
// counters, kChannels words each of done and expect, kChannels * kDepth of reduced, nranks
// dc_readers, then the rings.
inline size_t flags_bytes(int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  return (sizeof(uint64_t) * ((4 * n + 2) * kChannels + kChannels * kDepth + 1) + 255) / 256 * 256;
}

inline void point_at_area(Plan& p, char* area, int nranks) {
  const size_t words = static_cast<size_t>(nranks) * kChannels;
  auto* flags = reinterpret_cast<uint64_t*>(area);
  p.posted = flags;
  p.acked = flags + words;
  p.sent = flags + 2 * words;
  p.consumed = flags + 3 * words;
  p.done = flags + 4 * words;
  p.expect = p.done + kChannels;
  p.reduced = p.expect + kChannels;
  p.dc_readers = p.reduced + kChannels * kDepth;
  p.ring = area + flags_bytes(nranks);
}
// The plan of a collective that only moves data (all-gather, all-to-all(v), broadcast): what
// this rank sends to and receives from each member, and its own part. All-to-all-v trusts
// that each receiver's counts are its senders' (see symcomm.h).
inline void move_plan(Plan& p, const CollArgs& a) {
  const int n = a.team.size;
  if (a.op == CollOp::AllToAllv) {
    alltoallv_parts(p, a);
    return;
  }
  const uint64_t block = a.count * a.elem;
  if (a.op == CollOp::Broadcast) {
    const bool root = a.me == a.root;
    for (int j = 0; j < n; ++j) {
      p.send_len[j] = root ? block : 0;
      p.recv_len[j] = j == a.root ? block : 0;
    }
    p.self_len = root && a.send != a.recv ? block : 0;
    return;
  }
  const bool all = a.op == CollOp::AllToAll;  // else all-gather
  for (int j = 0; j < n; ++j) {
    p.send_off[j] = all ? j * block : 0;
    p.send_len[j] = p.recv_len[j] = block;
    p.recv_off[j] = j * block;
  }
  p.self_src = all ? a.me * block : 0;
  p.self_dst = a.me * block;
  p.self_len = a.send == a.recv + p.self_dst ? 0 : block;  // in-place all-gather
}
// A large broadcast in two kernels, so that the root's links carry the message once, not
// n - 1 times: the root scatters segment j of it to member j (and copies the whole into its
// own recv), then the members other than the root all-gather their segments (the root
// sends its own segment and receives nothing).
constexpr uint64_t kBroadcastSplitMin = 4 << 20;  // at 2 MiB one kernel takes 27.6 us, two 37.8
inline int broadcast_plans(const Plan& base, const CollArgs& a, Plan out[2]) {
  const int n = a.team.size;
  const bool root = a.me == a.root;
  const uint64_t block = a.count * a.elem, seg = (a.count + n - 1) / n * a.elem;
  auto seg_len = [&](int j) {
    const uint64_t lo = std::min<uint64_t>(block, j * seg);
    return std::min<uint64_t>(block, lo + seg) - lo;
  };
  Plan& s = out[0];
  s = base;
  for (int j = 0; j < n; ++j) {
    s.send_off[j] = j * seg;
    s.send_len[j] = root && j != a.me ? seg_len(j) : 0;
    s.recv_off[j] = a.me * seg;
    s.recv_len[j] = !root && j == a.root ? seg_len(a.me) : 0;
  }
  s.self_len = root && a.send != a.recv ? block : 0;
  Plan& g = out[1];
  g = base;
  g.send = a.recv;
  for (int j = 0; j < n; ++j) {
    g.send_off[j] = a.me * seg;
    g.send_len[j] = j == a.me || j == a.root ? 0 : seg_len(a.me);
    g.recv_off[j] = j * seg;
    g.recv_len[j] = root || j == a.me ? 0 : seg_len(j);
  }
  return 2;
}
// The kernels of a collective that only moves data (from `base`): one, or two for a large
// broadcast. Returns how many plans it wrote.
inline int move_plans(const Plan& base, const CollArgs& a, Plan out[2]) {
  if (a.op == CollOp::Broadcast && a.team.size > 2 && a.count * a.elem >= kBroadcastSplitMin)
    return broadcast_plans(base, a, out);
  out[0] = base;
  move_plan(out[0], a);
  return 1;
}
// Makes `p` a reduction: receivers combine `len` bytes from every member (this rank's own
// at send + own) into recv + out.
inline void reduction(Plan& p, uint64_t len, uint64_t own, uint64_t out) {
  p.reduce = true;
  p.red_len = len;
  p.red_own = own;
  p.red_out = out;
  for (int j = 0; j < p.n; ++j) p.recv_len[j] = j == p.me ? 0 : len;
}

// The kernels of a reduction (from `base`, which has the buffers and the area): one for a
// reduce-scatter; for an all-reduce one shot while every rank's whole buffer is small (each
// rank reads n - 1 of them), otherwise two shots: reduce-scatter into this rank's segment of
// recv, then all-gather of the segments (recv + segment is read while other segments are
// written: disjoint). Returns how many plans it wrote (0 for an empty call). One shot moves
// (n - 1) x the buffer in and out of each rank in one kernel; two shots 2 (n - 1) / n x in
// two: one shot up to 768 KiB / (n - 1) per rank (256 KiB on 4 ranks, where two shots took
// 16.6 us at 128 KiB and NCCL 11.1, bench/results/h200x4/coll_d7387de.jsonl).
constexpr uint64_t kOneShotBytes = 768 << 10;
inline int reduce_plans(const Plan& base, const CollArgs& a, Plan out[2]) {
  const int n = a.team.size;
  const uint64_t block = a.count * a.elem;
  if (block == 0) return 0;
  Plan& p = out[0];
  p = base;
  if (a.op == CollOp::ReduceScatter) {
    for (int j = 0; j < n; ++j) {
      p.send_off[j] = j * block;
      p.send_len[j] = block;
    }
    reduction(p, block, a.me * block, 0);
    return 1;
  }
  // In place, a reducer writes nothing before this rank's senders have read every chunk,
  // and they cannot get past kDepth chunks per channel before the peers' reducers
  // acknowledge: one shot in place only while no channel carries more than that.
  const ChunkPlan cp = pair_plan(base, block);
  const bool in_place = a.send == a.recv && n > 1;
  if (n == 1 || (block <= kOneShotBytes / static_cast<uint64_t>(n - 1) &&
                 (!in_place || cp.count <= static_cast<uint64_t>(kDepth) * cp.channels))) {
    for (int j = 0; j < n; ++j) p.send_len[j] = j == a.me ? 0 : block;
    reduction(p, block, 0, 0);
    p.in_place = in_place;
    return 1;
  }
  const uint64_t seg = (a.count + n - 1) / n * a.elem;
  auto seg_len = [&](int j) {
    const uint64_t lo = std::min<uint64_t>(block, j * seg);
    return std::min<uint64_t>(block, lo + seg) - lo;
  };
  for (int j = 0; j < n; ++j) {
    p.send_off[j] = j * seg;
    p.send_len[j] = j == a.me ? 0 : seg_len(j);
  }
  reduction(p, seg_len(a.me), a.me * seg, a.me * seg);
  Plan& ag = out[1];
  ag = base;
  ag.send = a.recv;
  for (int j = 0; j < n; ++j) {
    ag.send_off[j] = a.me * seg;
    ag.send_len[j] = j == a.me ? 0 : seg_len(a.me);
    ag.recv_off[j] = j * seg;
    ag.recv_len[j] = j == a.me ? 0 : seg_len(j);
  }
  return 2;
}
// All-to-all-v with counts in device memory: one kernel (see "Counts on the device"), which
// reads the counts when it runs, so a graph replays it with the counts of the moment.
inline Plan device_counts_plan(const Plan& base, const CollArgs& a) {
  Plan p = base;
  p.dev_send_counts = reinterpret_cast<const uint64_t*>(a.send_counts);
  p.dev_send_displs = reinterpret_cast<const uint64_t*>(a.send_displs);
  p.dev_recv_counts = reinterpret_cast<uint64_t*>(const_cast<size_t*>(a.recv_counts));
  p.dev_recv_displs = reinterpret_cast<uint64_t*>(const_cast<size_t*>(a.recv_displs));
  p.capacity = a.count;
  p.elem = a.elem;
  return p;
}
// END sm protocol

// Bytes of rings for `nranks` senders with slots of `slot` bytes.
uint64_t ring_bytes(int nranks, uint64_t slot) {
  return static_cast<uint64_t>(nranks) * kChannels * kDepth * slot;
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
    if (a.op == CollOp::ReduceScatter || a.op == CollOp::AllReduce) {
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
    Plan p{};
    p.comm = s.world;
    p.send = a.send;
    p.recv = a.recv;
    point_at_area(p, s.area, s.world.nranks);
    p.slot = s.slot;
    p.n = a.team.size;
    p.me = a.me;
    set_channels(p, static_cast<int>(kBlocks.get()), static_cast<int>(kBlocksLarge.get()),
                 s.room());
    p.large_from = kLargeFrom.get();
    p.op = a.redop;
    for (int j = 0; j < p.n; ++j) p.world[j] = a.team.world_of(j);
    return p;
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
