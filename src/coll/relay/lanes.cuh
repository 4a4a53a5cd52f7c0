// The relay broadcast's lanes on the device (the protocol: relay.cu's header): the root's
// stores and signals, an owner's forwarding, the counters; relay_kernel is the kernel.
#pragma once

#include "coll/device/counters.h"
#include "coll/device/env.cuh"
#include "coll/device/flag_wait.cuh"
#include "coll/relay/plan.h"

namespace symcomm {
namespace relay {

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

// The word of coll/device/counters.h's layout (protocol::counter_word), written out: through
// counter_word the compiler arranges this kernel's code otherwise (the emulation checks that
// both name the same words).
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

// Thread m (m < n, m != me): data = value on member m, a signal (see "Ordering"; the
// caller's __syncthreads came first).
__device__ __forceinline__ void signal_data(const Plan& p, int m, uint64_t value) {
  protocol::signal_release(
      [&] { return counter(p.flags_on[m], p, kData, static_cast<int>(blockIdx.x), p.comm.rank); },
      value);
}

// A block: a lane, or a slice of the root's own copy. The kernel itself, here (static: a
// kernel has a host symbol, which must not meet the host emulation's own function): its body
// in a __device__ function of its own, as the other algorithms have it, came out of the
// compiler otherwise.
static __global__ void __launch_bounds__(kThreads) relay_kernel(const __grid_constant__ Plan p) {
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
    const bool eager = rounds > 1 || p.piece > kEagerPiece;  // see "Signals" in relay.cu
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

}  // namespace relay
}  // namespace symcomm
