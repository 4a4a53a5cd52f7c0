// The test data pattern, the same on the host and in kernels: never zero-heavy, different
// for every (writer, allocation, index), so misplaced or stale bytes are caught.
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define MP_HD __host__ __device__
#else
#define MP_HD
#endif

namespace mp {

MP_HD inline uint8_t pattern(int who, uint64_t what, size_t index) {
  uint64_t x = (static_cast<uint64_t>(who) + 1) * 0x9e3779b97f4a7c15ull ^
               what * 0xbf58476d1ce4e5b9ull ^ static_cast<uint64_t>(index) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd39ull;
  return static_cast<uint8_t>(x >> 56);
}

}  // namespace mp
