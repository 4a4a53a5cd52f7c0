// The twoshot collectives' rounds on the device (the protocol: twoshot.cu's header): the
// READY and DONE exchanges between the blocks of one index across the team, the reduction
// of a block's slice, the copies through the stage areas; twoshot_kernel is the kernel.
#pragma once

#include "coll/device/counters.h"
#include "coll/device/env.cuh"
#include "coll/device/flag_wait.cuh"
#include "coll/twoshot/plan.h"
#include "copy/reduce.h"

namespace symcomm {
namespace twoshot {

using protocol::load_shared;

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

// The word of coll/device/counters.h's layout (protocol::counter_word), written out: through
// counter_word the compiler arranges this kernel's code otherwise (the emulation checks that
// both name the same words).
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
    protocol::signal_release([&] { return flag(p.flags_on[m], p, kind, b, p.comm.rank); }, g);
    rc = detail::wait_local(p.comm, flag(p.flags, p, kind, b, p.world[m]), symcommCmpGe, g);
  }
  return __syncthreads_or(rc);
}

// Shot 1 (and 2): this block's slice of this rank's segment, combined over the members,
// to recv and (all-reduce) to every peer, or (reduce) to the root's stage_out. 16-byte
// vectors, then the tail element by element.
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
  // This rank's recv takes its segment's result, unless a reduce's root is another member:
  // then the root's stage_out does.
  const bool keep = p.root < 0 || p.me == p.root;
  char* const mine = keep ? p.recv + (p.all || p.root >= 0 ? p.me * p.seg : 0) : nullptr;
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
    if (!keep) {
      *reinterpret_cast<uint4*>(p.out_base[p.root] + out_at(o)) = out;
    } else if (p.recv_vec) {
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
    store_element(keep ? mine + o : p.out_base[p.root] + out_at(o), out);
    if (p.all)
      for (int i = 1; i < p.n; ++i) {
        const int m = (p.me + i) % p.n;
        store_element(p.out_base[m] + out_at(o), out);
      }
  }
}

// Block b: every round (see "Blocks"), then the counters. The kernel itself, here (static:
// a kernel has a host symbol, which must not meet the host emulation's own function): its
// body in a __device__ function of its own, as sm and ll have it, came out of the compiler
// otherwise.
template <typename T>
static __global__ void __launch_bounds__(kThreads) twoshot_kernel(const __grid_constant__ Plan p) {
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
    if ((p.all || (p.root >= 0 && p.me == p.root)) && p.out_staged)
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

}  // namespace twoshot
}  // namespace symcomm
