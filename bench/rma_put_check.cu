// symcomm-bench rma: the check of each put point. The receiver's buffer is poisoned, the
// sender fills its source with a pattern particular to it and the point, one put runs, and
// the receiver compares its copy with the pattern (whole up to 64 MiB, sampled above) and
// the bytes after it with the poison.
#include <algorithm>
#include <cstdio>

#include "rma_bench.h"

namespace bench::rma {

namespace {

constexpr unsigned char kPoison = 0xff;             // the receive buffer before the put
constexpr size_t kCheckBytes = size_t{64} << 20;    // compared whole up to this, sampled above
constexpr size_t kGuardBytes = 4096;                // after the put's bytes: must stay poisoned

__host__ __device__ inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Byte i of the pattern `seed`: any value but the poison.
__host__ __device__ inline unsigned char pattern_byte(uint64_t seed, size_t i) {
  const uint64_t word = mix64(seed + (static_cast<uint64_t>(i >> 3) + 1) * 0x9e3779b97f4a7c15ull);
  const auto b = static_cast<unsigned char>(word >> ((i & 7) * 8));
  return b == kPoison ? 0 : b;
}

__global__ void fill_pattern(unsigned char* p, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = pattern_byte(seed, i);
}

struct Span {
  size_t begin, len;  // bytes of the receive buffer
};

// What is compared: every byte up to kCheckBytes; above, the first and last 64 KiB and 64
// windows of 4 KiB at places that change with the seed.
std::vector<Span> spans_to_check(size_t bytes, uint64_t seed) {
  if (bytes <= kCheckBytes) return {{0, bytes}};
  const size_t edge = size_t{64} << 10, len = 4096;
  std::vector<Span> spans{{0, edge}, {bytes - edge, edge}};
  uint64_t r = seed;
  for (int i = 0; i < 64; ++i) {
    r = mix64(r + 0x9e3779b97f4a7c15ull);
    spans.push_back({static_cast<size_t>(r % (bytes - len + 1)), len});
  }
  return spans;
}

}  // namespace

// One put of `bytes` checked at the receiver, rank 1: rank 0 fills its `src` with a pattern
// of its own and of `point`, rank 1 poisons `recv` (its own buffer the put lands in) and up to
// kGuardBytes after it (within `capacity`, the buffer's size), then `put` runs on every rank
// (it makes the call on the ranks that take part) and every rank's stream is synchronised;
// rank 1 compares. Collective; returns whether the data arrived and nothing past it changed.
// (A wrong put is said on stderr by rank 1.)
bool check_put(Context& ctx, const std::string& where, char* src, char* recv, size_t bytes,
               size_t capacity, uint64_t point, const std::function<void()>& put) {
  const int sender = 0;  // every put of the series goes from rank 0 to rank 1
  const uint64_t seed =
      mix64((static_cast<uint64_t>(sender + 1) << 56) ^ (point << 8) ^ 0x726d6163686b0000ull);
  const size_t guard = std::min(kGuardBytes, capacity - bytes);
  if (ctx.rank == sender) {
    const unsigned grid = static_cast<unsigned>(std::min<size_t>((bytes + 255) / 256, 4096));
    fill_pattern<<<grid, 256, 0, ctx.stream>>>(reinterpret_cast<unsigned char*>(src), bytes, seed);
    BENCH_CUDA(cudaGetLastError());
  } else if (ctx.rank == 1) {
    BENCH_CUDA(cudaMemsetAsync(recv, kPoison, bytes + guard, ctx.stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_SC(symcommHostBarrier(ctx.comm));  // poisoned before anything is put
  put();
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_SC(symcommHostBarrier(ctx.comm));  // the put is complete
  size_t wrong = 0, past = 0, checked = 0;
  if (ctx.rank == 1) {
    std::string first;
    std::vector<unsigned char> got;
    for (const Span& sp : spans_to_check(bytes, seed)) {
      got.resize(sp.len);
      BENCH_CUDA(cudaMemcpy(got.data(), recv + sp.begin, sp.len, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < sp.len; ++i) {
        const unsigned char want = pattern_byte(seed, sp.begin + i);
        if (got[i] == want) continue;
        if (++wrong <= 3) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "%s[%zu] want 0x%02x got 0x%02x", first.empty() ? "" : ", ",
                        sp.begin + i, want, got[i]);
          first += buf;
        }
      }
      checked += sp.len;
    }
    got.resize(guard);
    if (guard) BENCH_CUDA(cudaMemcpy(got.data(), recv + bytes, guard, cudaMemcpyDeviceToHost));
    past = static_cast<size_t>(std::count_if(got.begin(), got.end(),
                                             [](unsigned char b) { return b != kPoison; }));
    if (wrong || past)
      std::fprintf(stderr, "symcomm-bench rma: FAILED: put %s, %zu bytes: %zu of %zu checked "
                   "bytes differ (%s); %zu of %zu bytes after it written\n", where.c_str(), bytes,
                   wrong, checked, first.c_str(), past, guard);
  }
  return max_over_ranks(ctx, static_cast<double>(wrong + past)) == 0;
}

}  // namespace bench::rma
