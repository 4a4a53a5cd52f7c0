// Low-latency packets (NCCL's LL protocol), as the ll collectives use them: 16 bytes {data0,
// flag, data1, flag} that one st.volatile.global.v4.u32 writes straight into a peer's memory,
// and that the peer polls with ld.volatile.global.v4.u32 until both flags are the one it
// expects. Each 8-byte half {data, flag} is single-copy atomic (over NVLink too), the 16 bytes
// as a whole are not: hence a flag in each half; once both are new, each half is the new one.
// The data is its own signal: no counter, no fence. 8 payload bytes per packet.
//
// On the host (tests/unit/emulation/harness.h), store_packet, load_packet and poll_pause are
// the emulation's: two 8-byte atomics in either order.
#pragma once

#include "coll/device/env.cuh"

namespace symcomm {
namespace protocol {

#if defined(__CUDACC__)
// Generic addresses of global memory are global addresses, as NCCL's LL code assumes too.
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
#endif

// The flag of round g (of a block and pair): 32 bits, so it wraps (the ll algorithm rewrites
// whole slots now and then for that).
__host__ __device__ inline uint32_t flag_of(uint64_t g) { return static_cast<uint32_t>(g + 1); }

// Packets that carry `bytes` bytes: one per 8, or one token for none.
__host__ __device__ inline uint64_t packets_for(uint64_t bytes) {
  return bytes == 0 ? 1 : (bytes + 7) / 8;
}

// The payload bytes of packet k of a slice of `bytes` bytes (0 for a token or beyond).
__host__ __device__ inline uint64_t packet_bytes(uint64_t bytes, uint64_t k) {
  return 8 * k < bytes ? (8 < bytes - 8 * k ? 8 : bytes - 8 * k) : 0;
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
__device__ inline int poll_packet(const DeviceComm& c, const uint4* at, uint32_t flag,
                                  uint64_t* data) {
  constexpr uint32_t kCheckEvery = 1024;
  uint4 v = load_packet(at);
  uint64_t start = 0;
  for (uint32_t polls = 1; v.y != flag || v.w != flag; ++polls) {
    if (polls % kCheckEvery == 0) {
      const uint64_t now = detail::global_time_ns();
      if (start == 0) start = now;
      int code = 0;
      if (c.abort_flag != nullptr && *c.abort_flag != 0)
        code = symcommPeerLost;
      else if (c.wait_timeout_ns != 0 && now - start > c.wait_timeout_ns)
        code = symcommTimeout;
      if (code != 0) {
        detail::record_error(c, code, at, symcommCmpEq, flag,
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

}  // namespace protocol
}  // namespace symcomm
