// The sm collectives' channels on the device (the protocol: sm.cu's header): a block sends
// a message to one member over one channel, or receives (and maybe reduces) one, through the
// rings and counters of sm/plan.h; sm_block is the kernel's body. The functions that are not
// inline are static: nvcc gives a __device__ function with external linkage a host symbol,
// which would meet the host emulation's own definition of it.
#pragma once

#include "coll/device/env.cuh"
#include "coll/device/flag_wait.cuh"
#include "coll/sm/plan.h"
#include "copy/reduce.h"

namespace symcomm {
namespace sm {

// What this rank sends to member j or receives from it: `len` bytes at `off` in send or
// recv, after a header of `head` bytes (counts on the device: counts.cuh) that travels first
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

// Thread 0 waits for `word` to reach `value`; the block learns whether the wait failed
// (coll/device/flag_wait.cuh).
__device__ __forceinline__ bool block_wait(const Plan& p, const uint64_t* word, uint64_t value) {
  return protocol::block_wait(p.comm, threadIdx.x == 0, word, value) == 0;
}

// Publishes `value` in `word` (a peer's) after everything the block did before: a signal
// (coll/device/flag_wait.cuh).
__device__ __forceinline__ void post(uint64_t* word, uint64_t value) {
  __syncthreads();
  if (threadIdx.x == 0) protocol::signal_release(word, value);
}

// Tells a sender that the block has read a slot, which it may now overwrite: an
// acknowledgement, no fence (coll/device/flag_wait.cuh; a fence.sys here would cost 0.6 us
// on every chunk).
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

static __device__ void send_to(const Plan& p, const Transfer& t, int j, int c) {
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

static __device__ void receive_from(const Plan& p, const Transfer& t, int j, int c) {
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
static __device__ void reduce_channel(const Plan& p, int c, int r) {
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
static __device__ void copy_own(const Plan& p, uint64_t src, uint64_t dst, uint64_t len,
                                int part) {
  const uint64_t piece = (len + p.self_blocks - 1) / p.self_blocks / 16 * 16 + 16;
  const uint64_t off = static_cast<uint64_t>(part) * piece;
  if (off < len)
    detail::copy(p.recv + dst + off, p.send + src + off, min(piece, len - off), threadIdx.x,
                 blockDim.x);
}


// Blocks: [receivers | senders | own part], each group `channels` blocks per peer (or per
// channel alone for reducing receivers and the own part): sm_kernel's body (sm.cu).
template <typename T>
__device__ __forceinline__ void sm_block(const Plan& p) {
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

}  // namespace sm
}  // namespace symcomm
