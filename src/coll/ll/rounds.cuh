// The ll collectives' rounds on the device (the protocol: ll.cu's header), in the packets
// of coll/device/ll_packet.cuh: a block's send and receive phases, the reduction, the own
// part; ll_block is the kernel's body.
#pragma once

#include "coll/device/env.cuh"
#include "coll/device/ll_packet.cuh"
#include "coll/ll/plan.h"
#include "copy/reduce.h"

namespace symcomm {
namespace ll {

using protocol::flag_of;
using protocol::load_bytes;
using protocol::packet_bytes;
using protocol::packets_for;
using protocol::store_bytes;
using protocol::store_packet;

// Send phase, one peer: the block's slice of round r for member j, into j's memory. A
// refreshing round writes every packet of the slot (see "Flag wrap"). P: Plan, or
// SegmentedPlan (whose input lies in several buffers).
template <typename P>
__device__ inline void send_slice(const P& p, int j, uint64_t r, int b) {
  const int w = p.world[j];
  const uint64_t g = *seq_of(p, b, w) + r;
  const uint64_t bytes = slice_bytes(p.send_len[j], r, b);
  const uint64_t count = (g & (p.refresh - 1)) < 2 ? kThreads : packets_for(bytes);
  uint4* to = detail::remote(p.comm, slot(p.packets, p.comm.rank, g, b), w);
  for (uint64_t k = threadIdx.x; k < count; k += blockDim.x) {
    uint64_t nb = packet_bytes(bytes, k);
    const char* from = input_at(p, p.send_off[j] + slice_offset(r, b) + 8 * k, &nb);
    const uint64_t v = nb ? load_bytes(from, nb) : 0;
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
    if (const int rc = protocol::poll_packet(p.comm, from + k, flag_of(g), &v)) return rc;
    if (const uint64_t nb = packet_bytes(bytes, k))
      store_bytes(p.recv + p.recv_off[j] + slice_offset(r, b) + 8 * k, v, nb);
  }
  return 0;
}

// Member m's 8 bytes at packet k of block b's slice of round r: this rank's own from its
// input, a peer's from its packet (`nb` payload bytes, 0 for a token).
template <typename P>
__device__ inline int contribution(const P& p, int m, uint64_t r, int b, uint64_t k,
                                   uint64_t nb, uint64_t* v) {
  *v = 0;
  if (m == p.me) {
    const char* from = input_at(p, p.red_own + slice_offset(r, b) + 8 * k, &nb);
    if (nb) *v = load_bytes(from, nb);
    return 0;
  }
  const int w = p.world[m];
  const uint64_t g = *seq_of(p, b, w) + r;
  return protocol::poll_packet(p.comm, slot(p.packets, w, g, b) + k, flag_of(g), v);
}

// Receive phase of a reduction, every peer at once (all pairs have the same shape): each
// packet's elements combined over the members in team-rank order.
template <typename T, typename P>
__device__ inline int reduce_slice(const P& p, uint64_t r, int b) {
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
    uint64_t out = nb;
    char* to = output_at(p, p.red_out + slice_offset(r, b) + 8 * k, &out);
    if (out == 0) continue;  // a token, or bytes between segments
    for (int i = 0; i < kLanes; ++i) x[i] = narrow<T>(acc[i]);
    memcpy(&v, x, 8);
    store_bytes(to, v, out);
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
// a barrier), the own part once the first round is sent, then the counters: ll_kernel's
// body (ll.cu).
template <typename T, typename P>
__device__ __forceinline__ void ll_block(const P& p) {
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

}  // namespace ll
}  // namespace symcomm
