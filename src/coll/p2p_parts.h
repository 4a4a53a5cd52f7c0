// How the cuda space's send/recv cuts a message into its lane's ways (coll/p2p_plan.h): host
// and device code, so that the unit tests check the cut on the CPU.
#pragma once

#include <cstdint>

namespace symcomm {

#if defined(__CUDACC__)
#define SYMCOMM_P2P_PART __host__ __device__ __forceinline__
#else
#define SYMCOMM_P2P_PART inline
#endif

// Way `way`'s part of a message of `total` bytes over `ways` ways: parts of equal size in
// whole 256-byte units, the last one shorter, those past the end empty.
struct P2pPart {
  uint64_t at, bytes;
};
SYMCOMM_P2P_PART P2pPart p2p_part(uint64_t total, int ways, int way) {
  const uint64_t n = static_cast<uint64_t>(ways);
  const uint64_t per = ((total + n - 1) / n + 255) / 256 * 256;
  const uint64_t w = static_cast<uint64_t>(way);
  const uint64_t from = per * w < total ? per * w : total;
  const uint64_t to = per * (w + 1) < total ? per * (w + 1) : total;
  return P2pPart{from, to - from};
}

// The chunks a part of `bytes` takes in slots of `chunk` data bytes: at least one (a part of
// 0 bytes still carries the message's header).
SYMCOMM_P2P_PART uint64_t p2p_chunks(uint64_t bytes, uint64_t chunk) {
  return bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
}

}  // namespace symcomm
