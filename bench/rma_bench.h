// The pieces of `symcomm-bench rma` that its files share: rma_bench.cu (the entry point and
// the record of a point), rma_put.cu (put bandwidth), rma_put_check.cu (the check of each put
// point) and rma_latency.cu (ping-pong and barrier latencies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "bench.h"

namespace bench::rma {

// A point's record (bench "rma"): algbw_gbs from bytes over time_us where bytes is not 0.
Record point(const Context& ctx, const char* op, std::string impl, size_t bytes, double us,
             int ranks);

// One put of `bytes` from rank 0 checked at rank 1 (rma_put_check.cu says how). Collective.
bool check_put(Context& ctx, const std::string& where, char* src, char* recv, size_t bytes,
               size_t capacity, uint64_t point, const std::function<void()>& put);

// The put series from rank 0's `src` into rank 1's `dst` (both --max-bytes long). Returns the
// number of points whose check failed (check_put; their records say "verified": false).
int put_bandwidth(Context& ctx, char* dst, char* src);

// The latency table: device ping-pongs (the library's, its halves, put_signal, raw variants),
// stream ping-pongs and barriers. Returns the rounds of put_signal that received wrong data.
unsigned long long latency(Context& ctx);

}  // namespace bench::rma
