// The pieces of `symcomm-bench decomp` that its files share: decomp_options.cc (usage and
// options), decomp_runner.cu (the check and the timing of one backend on one configuration),
// decomp_autotune.cu (the autotuner against the bench's measurements) and decomp_bench.cu
// (the run loop and its records).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "symcomm/decomp.h"

namespace bench::decomp {

// The transposes timed, in the order timed: X->Y reads buffer 0 into 1, Y->Z 1 into 2, Z->Y
// 2 into 1 and Y->X 1 into 0 (the buffers hold the X, Y and Z pencils).
struct TimedOp {
  const char* key;   // --ops
  const char* name;  // the record's op
  int from, to;      // pencil axes, which are also the buffers
};
inline constexpr TimedOp kTimedOps[] = {{"xy", "transpose_xy", 0, 1},
                                        {"yz", "transpose_yz", 1, 2},
                                        {"zy", "transpose_zy", 2, 1},
                                        {"yx", "transpose_yx", 1, 0}};
inline constexpr int kNumOps = 4;

// ---- One configuration --------------------------------------------------------------------

struct Config {
  int64_t n;
  symcommDecompType_t type;
  const char* dtype;
  int pr, pc;
};

struct Result {
  std::string backend;
  bool ran = false, verified = false;
  bool timed[kNumOps] = {};     // per kTimedOps entry: chosen by --ops
  double us[kNumOps] = {};      // the slowest rank's median
  double host_us[kNumOps] = {}; // median host time to enqueue one call, the slowest rank's
  size_t bytes[kNumOps] = {};   // sent to other ranks, the most of any rank
};

inline bool op_wanted(const DecompOptions& o, const TimedOp& op) {
  return o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), op.key) != o.ops.end();
}

inline std::string grid_name(int pr, int pc) {
  return std::to_string(pr) + "x" + std::to_string(pc);
}

// The record's "layout" (a JSON string): how the pencils lie in memory.
inline std::string layout_json(const DecompOptions& o) {
  return o.contiguous ? "\"axis_contiguous\"" : "\"x_fastest\"";
}

inline std::string shape_of(int64_t n, int pr, int pc) {
  const std::string ns = std::to_string(n);
  return "[" + ns + "," + ns + "," + ns + "] " + std::to_string(pr) + " x " + std::to_string(pc);
}

// Runs each backend on each configuration (decomp_runner.cu): the round-trip check, then the
// timing of the transposes chosen by --ops.
class Runner {
 public:
  explicit Runner(Context& ctx);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Runs one backend on one configuration; ran = false where the backend cannot run here.
  Result run(const Config& cfg, const std::string& backend);

 private:
  bool time_graph(const Config& cfg, const symcommPencilInfo_t* p, void* const* buf,
                  size_t bytes, const TimedOp& op, int inner,
                  const std::function<symcommResult_t()>& call, Result* r, double* us,
                  double* host);
  void* alloc(size_t bytes);
  void release(void* p);
  unsigned long long index_pass(void* buf, const symcommPencilInfo_t& p, int64_t n, bool check);

  Context& ctx_;
  unsigned long long* bad_ = nullptr;
};

// ---- The autotuner against the bench's measurements (decomp_autotune.cu) ------------------

// One (grid, backend) the bench ran for the current size and type.
struct Measured {
  int pr, pc;
  Result r;
};

struct Pick {
  bool ok = false;
  int pr = 0, pc = 0;
  std::string backend;
  std::string why;  // where autotuning failed
};

// What the autotuner picks among the grids and backends the bench measured.
Pick autotune(const Context& ctx, const Config& cfg, const std::vector<std::string>& grids,
              const std::vector<std::string>& backends);
// The line on rank 0 and the record of the pick against the best measured.
void report_autotune(const Context& ctx, const Config& cfg, const Pick& pick,
                     const std::vector<Measured>& all);

}  // namespace bench::decomp
