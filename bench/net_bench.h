// The pieces of `symcomm-bench net` that its files share: net_bench.cc (options, setup, the
// table and records, idle CPU), net_bandwidth.cc (put bandwidth) and net_latency.cc
// (ping-pong latencies and the 8-byte target), each against raw libfabric (net_raw.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "bench.h"
#include "net_raw.h"

namespace bench::net {

constexpr size_t kSlack = 64;        // bytes past each point's data checked to be still poison
constexpr size_t kRawData = 4096;    // the raw buffer: word 0 the control word, data from here
constexpr unsigned char kPoison = 0xEE;

// What every measurement uses, alike on both ranks.
struct Setup {
  Context& ctx;
  int peer;            // the other rank (on the other node)
  char* dst;           // symmetric, `capacity` bytes: where symcomm's puts land
  uint64_t* sig;       // symmetric word: the ping-pong's signal
  char* src;           // local (malloc'd), `capacity` bytes: the source of symcomm's puts and
                       // of the raw bandwidth's writes
  char* raw_src;       // local, `capacity` bytes: the raw ping-pong's source (its last word
                       // changes every round)
  size_t capacity;     // the largest size measured + kSlack
  RawFabric& raw;      // its buffer: kRawData + capacity bytes
  std::string provider, domain;  // the raw endpoint's (the transport's, as chosen alike)
  uint64_t point = 0;  // points so far: each point's data pattern differs
  uint64_t round = 0;  // the ping-pongs' running value (signal value, raw round word)
  uint64_t control = 0;  // the raw bandwidth's end-of-repetition word
};

// `bytes` of the pattern of rank `from` at point `seed` (64-bit words of a hash).
void fill(char* p, size_t bytes, int from, uint64_t seed);
// Whether p holds that pattern.
bool pattern_ok(const char* p, size_t bytes, int from, uint64_t seed);
// Whether p holds only poison.
bool poison_ok(const char* p, size_t bytes);
// Collective: whether `ok` holds on both ranks.
bool both(const Context& ctx, bool ok);
void barrier(const Context& ctx);
// Seconds on a steady clock.
double now_s();

// Rank 0's median times of the two implementations at one point: repetitions (--warmup
// untimed, then --iters) alternate between them, raw first, each after a barrier, so that a
// load that changes during the run falls on both alike. Each function runs one repetition on
// this rank and returns its time per operation in microseconds (rank 0's is the one used).
struct Medians {
  double raw_us, symcomm_us;
};
Medians alternate(const Context& ctx, const std::function<double()>& raw,
                  const std::function<double()>& symcomm);

// A point's record with the fields every net record has (provider, domain, space, verified).
Record record(const Setup& s, const char* op, const std::string& impl, size_t bytes, double us,
              bool verified);
// Rank 0: the table's line and the JSON record. vs_raw (raw's time over this one's; 0: none)
// is added to the record and printed.
void report(const Setup& s, Record r, double vs_raw);
std::string number(double v);  // a JSON number with 3 decimals

// Each returns the number of points whose check failed (their records say so).
int bandwidth(Setup& s);
int latency(Setup& s);

}  // namespace bench::net
