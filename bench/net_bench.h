// The pieces of `symcomm-bench net` that its files share: net_bench.cc (options, setup, the
// table and records, idle CPU), net_memory.cc (patterns, poison and checks in either memory
// space), net_bandwidth.cc (put bandwidth) and net_latency.cc (ping-pong latencies and the
// 8-byte target), each against raw libfabric (net_raw.h) and, in the cuda space, NCCL's own
// network path (net_nccl.h); net_failover.cc (a rail killed under a stream of puts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "net_nccl.h"
#include "net_raw.h"

namespace bench::net {

constexpr size_t kSlack = 64;        // bytes past each point's data checked to be still poison
constexpr size_t kRawData = 4096;    // the raw buffer: word 0 the control word, data from here
constexpr unsigned char kPoison = 0xEE;

// What every measurement uses, alike on both ranks. In the cuda space symcomm's and NCCL's
// buffers are GPU memory and their calls go on ctx.stream; raw libfabric's stay host memory.
struct Setup {
  Context& ctx;
  int peer;            // the other rank (on the other node)
  bool cuda;           // the cuda memory space
  char* dst;           // symmetric, `capacity` bytes: where symcomm's puts land
  uint64_t* sig;       // symmetric word: the ping-pong's signal
  char* src;           // local, `capacity` bytes: the source of symcomm's puts and NCCL's
                       // sends (cudaMalloc'd in the cuda space, else malloc'd)
  char* host_src;      // local host memory, `capacity` bytes: the raw bandwidth's source
                       // (src itself in the host space)
  char* raw_src;       // local host memory, `capacity` bytes: the raw ping-pong's source (its
                       // last word changes every round)
  char* host_copy;     // cuda space: `capacity` bytes of host memory through which GPU
                       // buffers are filled and checked (else nullptr)
  size_t capacity;     // the largest size measured + kSlack
  RawFabric& raw;      // its buffer: kRawData + capacity bytes
  NcclPeer* nccl;      // cuda space: NCCL's baseline (its receive buffer `capacity` bytes);
                       // nullptr in the host space and where NCCL is not available
  std::string provider, domain;  // the raw endpoint's (the transport's, as chosen alike)
  uint64_t point = 0;  // points so far: each point's data pattern differs
  uint64_t round = 0;  // the ping-pongs' running value (signal value, raw round word)
  double target_raw_us = 0;  // raw fi_write's one-way time of the 8-byte target
  uint64_t control = 0;  // the raw bandwidth's end-of-repetition word
  std::vector<std::string> targets;  // the bandwidth targets' verdicts, printed at the end
};

// `bytes` of the pattern of rank `from` at point `seed` (64-bit words of a hash).
void fill(char* p, size_t bytes, int from, uint64_t seed);
// Whether p holds that pattern.
bool pattern_ok(const char* p, size_t bytes, int from, uint64_t seed);
// Whether p holds only poison.
bool poison_ok(const char* p, size_t bytes);
// The same in the space's memory (GPU memory in the cuda space): the pattern or poison into
// `p`, and whether `p` holds the pattern over `bytes` and poison over the kSlack bytes past.
void set_pattern(const Setup& s, char* p, size_t bytes, int from, uint64_t seed);
void set_poison(const Setup& s, char* p, size_t bytes);
bool landed_ok(const Setup& s, const char* p, size_t bytes, int from, uint64_t seed);
// Cuda space: waits until ctx.stream has run everything enqueued (host space: nothing).
void finish(const Setup& s);
// Collective: whether `ok` holds on both ranks.
bool both(const Context& ctx, bool ok);
void barrier(const Context& ctx);
// Seconds on a steady clock.
double now_s();
// Cuda space (net_device_latency.cu): the 8-byte put-signal's one-way time in microseconds
// from kernels, through the GPU-to-proxy ring: --rounds round trips a kernel, the median over
// --iters kernels; *ok where every wait succeeded on both ranks.
double device_pingpong_us(Setup& s, int rounds, bool* ok);

// Rank 0's median times of the implementations at one point: repetitions (--warmup untimed,
// then --iters) alternate between them, raw first, then symcomm, then NCCL (where `nccl` is
// given; else nccl_us is 0), each after a barrier, so that a load that changes during the run
// falls on all alike. Each function runs one repetition on this rank and returns its time per
// operation in microseconds (rank 0's is the one used).
struct Medians {
  double raw_us, symcomm_us, nccl_us;
};
Medians alternate(const Context& ctx, const std::function<double()>& raw,
                  const std::function<double()>& symcomm,
                  const std::function<double()>& nccl = nullptr);

// A point's record with the fields every net record has (provider, domain, space, buffers,
// verified); baselines' records also say what they are (`baseline`).
Record record(const Setup& s, const char* op, const std::string& impl, size_t bytes, double us,
              bool verified);
// Rank 0: the table's line and the JSON record. vs_raw and vs_nccl (the baseline's time over
// this one's; 0: none) are added to the record and printed.
void report(const Setup& s, Record r, double vs_raw, double vs_nccl = 0);
std::string number(double v);  // a JSON number with 3 decimals
// The baseline's time over symcomm's (0 where either is missing).
double ratio(double baseline_us, double symcomm_us);

// The implementations' names in the records.
constexpr const char* kRaw = "libfabric:fi_write";
constexpr const char* kNccl = "nccl";

// Each returns the number of points whose check failed (their records say so).
int bandwidth(Setup& s);
int latency(Setup& s);
// --kill-rail: a stream of puts with a rail's link set down under it (host space).
int failover(Setup& s);

}  // namespace bench::net
