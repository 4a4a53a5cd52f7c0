// symcomm-bench net: the data every point moves and checks. Each point's pattern is a hash of
// the sending rank and the point, so that a stale or misplaced byte is seen; targets are
// poisoned first, and a check also reads kSlack bytes past the size (still poison: nothing
// landed past the end). In the cuda space symcomm's and NCCL's buffers are GPU memory, filled
// and read through a host copy.
#include <algorithm>
#include <cstring>

#include "net_bench.h"

namespace bench::net {

namespace {

uint64_t word(uint64_t key, uint64_t k) {  // splitmix64 of key and index
  uint64_t x = key + (k + 1) * 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t key_of(int from, uint64_t seed) { return (seed << 8) | static_cast<uint64_t>(from); }

}  // namespace

void fill(char* p, size_t bytes, int from, uint64_t seed) {
  const uint64_t key = key_of(from, seed);
  size_t k = 0;
  for (; (k + 1) * 8 <= bytes; ++k) {
    const uint64_t w = word(key, k);
    std::memcpy(p + k * 8, &w, 8);
  }
  const uint64_t w = word(key, k);
  std::memcpy(p + k * 8, &w, bytes - k * 8);
}

bool pattern_ok(const char* p, size_t bytes, int from, uint64_t seed) {
  const uint64_t key = key_of(from, seed);
  size_t k = 0;
  for (; (k + 1) * 8 <= bytes; ++k) {
    const uint64_t w = word(key, k);
    if (std::memcmp(p + k * 8, &w, 8)) return false;
  }
  const uint64_t w = word(key, k);
  return std::memcmp(p + k * 8, &w, bytes - k * 8) == 0;
}

bool poison_ok(const char* p, size_t bytes) {
  return std::all_of(p, p + bytes, [](char c) { return static_cast<unsigned char>(c) == kPoison; });
}

void set_pattern(const Setup& s, char* p, size_t bytes, int from, uint64_t seed) {
  if (!s.cuda) return fill(p, bytes, from, seed);
  fill(s.host_copy, bytes, from, seed);
  BENCH_CUDA(cudaMemcpy(p, s.host_copy, bytes, cudaMemcpyHostToDevice));
}

void set_poison(const Setup& s, char* p, size_t bytes) {
  if (!s.cuda) {
    std::memset(p, kPoison, bytes);
    return;
  }
  BENCH_CUDA(cudaMemsetAsync(p, kPoison, bytes, s.ctx.stream));
  finish(s);
}

bool landed_ok(const Setup& s, const char* p, size_t bytes, int from, uint64_t seed) {
  const char* at = p;
  if (s.cuda) {
    // Every writer is done: this rank's stream ran its work, the peer's data landed (its
    // repetitions ended with the data at this rank) before the barrier that precedes a check.
    BENCH_CUDA(cudaMemcpy(s.host_copy, p, bytes + kSlack, cudaMemcpyDeviceToHost));
    at = s.host_copy;
  }
  return pattern_ok(at, bytes, from, seed) && poison_ok(at + bytes, kSlack);
}

void finish(const Setup& s) {
  if (s.cuda) BENCH_CUDA(cudaStreamSynchronize(s.ctx.stream));
}

}  // namespace bench::net
