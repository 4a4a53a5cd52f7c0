// symcomm-bench decomp: every transpose backend on every process grid, for n^3 grids of C32
// and R64 elements, with the "nccl" backend (where it is registered and can run) as the
// baseline of the same run.
//
// Per (size, dtype, grid, backend): a round trip X->Y->Z->Y->X on index-valued data checks
// the backend once (every output poisoned first); then each of the four transposes X->Y,
// Y->Z, Z->Y and Y->X (--ops: any of them) is timed apart: CUDA events around `inner`
// back-to-back calls per repetition (a pencil of 256 MiB or more per
// batch, at least 4 calls and at most 50: the stream's start after the previous repetition's
// synchronisation, and the ranks' skew, are spread over the batch as in a solver's steady
// state), --warmup untimed and --iters timed repetitions, the median per rank, the slowest
// rank's median reported. GB/s per GPU is the
// bytes a rank sends to the other ranks of its row or column (its pencil less the block it
// keeps) over that time, for the rank that sends most. Pencils are symmetric (symcommMalloc)
// unless --local-buffers; x is fastest in every pencil unless --contiguous.
//
// Records: bench "decomp", op "transpose_xy" / "_yz" / "_zy" / "_yx", impl "symcomm:<backend>",
// dtype "c32" / "f64", shape "[n,n,n] pr x pc", bytes per rank as above, algbw_gbs the GB/s
// per GPU; extra fields: n, grid, buffers, layout ("x_fastest", or "axis_contiguous" with
// --contiguous), verified, launch ("eager", or "graph" with --graph: each batch one replayed
// CUDA graph), host_us (the median host time to enqueue one call, the slowest rank's: near
// time_us, the point is bound by the host), and speedup_vs_nccl (the nccl backend's time over
// this one's) where the nccl backend ran on the same configuration, timed this transpose and
// passed its check (else the field is left out).
//
// Then, per (size, dtype) unless --no-autotune, the autotuner checked against these numbers
// (target: its pick within 5% of the best configuration measured): symcommDecompCreate with
// pdims 0 x 0 and backend "auto" among the grids and backends measured, and one record, op
// "autotune", impl and grid of the pick, time_us the sum of the bench's timed transposes of the
// pick (all four by default: the autotuner's score with equal weights); extra fields
// n, grid, buffers, layout, pick_measured, best_impl, best_grid, best_time_us, ratio (pick
// over best; null where the pick is not among the configurations measured), ops_summed.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "bench.h"
#include "symcomm/decomp.h"

namespace bench {

const char* const kDecompUsage =
    "  --sizes LIST     grid sizes n (n^3 points; default 256,512,1024)\n"
    "  --max-n N        skip sizes above N\n"
    "  --dtypes LIST    c32,r64 (default both)\n"
    "  --grids LIST     process grids such as 1x8,2x4 (default: every pr x pc = ranks)\n"
    "  --backends LIST  decomposition backends (default: every registered one)\n"
    "  --local-buffers  cudaMalloc'd pencils (default: symmetric ones, from symcommMalloc)\n"
    "  --contiguous     axis-contiguous pencils (default: x fastest in every pencil)\n"
    "  --ops LIST       transposes timed: xy,yz,zy,yx (default all four; the round-trip check\n"
    "                   runs all four regardless)\n"
    "  --no-autotune    skip the check after each size and type (default: autotune grid and\n"
    "                   backend among those measured, compare the pick with the best measured)\n"
    "  --graph          each timed batch is one CUDA graph of the batch's transposes, captured\n"
    "                   once per rank and replayed (the GPU's time, without a host launch per\n"
    "                   call); the replay is checked on fresh data first; transposes that some\n"
    "                   rank cannot capture are skipped with a note; no autotune check\n"
    "  --iters and --warmup count repetitions of a batch of transposes (256 MiB of pencils\n"
    "  per rank per batch, 4 to 50 calls).\n";

namespace {

bool autotune_check = true;  // --no-autotune clears it (decomp_option; read by run_decomp)

[[noreturn]] void bad_option(const char* option, const char* value, const std::string& why) {
  std::fprintf(stderr, "symcomm-bench decomp: %s %s: %s\n", option, value, why.c_str());
  std::exit(2);
}

std::vector<std::string> split(const char* text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else {
      cur += *p;
    }
  }
  return out;
}

int64_t to_int(const char* option, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    bad_option(option, text.c_str(), "expected an integer in [" + std::to_string(lo) + ", " +
                                         std::to_string(hi) + "]");
  return v;
}

// The transposes timed, in the order timed: X->Y reads buffer 0 into 1, Y->Z 1 into 2, Z->Y
// 2 into 1 and Y->X 1 into 0 (the buffers hold the X, Y and Z pencils).
struct TimedOp {
  const char* key;   // --ops
  const char* name;  // the record's op
  int from, to;      // pencil axes, which are also the buffers
};
constexpr TimedOp kTimedOps[] = {{"xy", "transpose_xy", 0, 1},
                                 {"yz", "transpose_yz", 1, 2},
                                 {"zy", "transpose_zy", 2, 1},
                                 {"yx", "transpose_yx", 1, 0}};
constexpr int kNumOps = 4;

bool registered(const std::string& name) {
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    if (name == symcommDecompBackendName(i)) return true;
  return false;
}

// ---- Index-valued data: every element (8 bytes for both types) holds its global index -----

__device__ int64_t pencil_index(const symcommPencilInfo_t& p, int64_t x, int64_t y, int64_t z) {
  const int64_t g[3] = {x, y, z};
  int64_t index = 0;
  for (int i = 2; i >= 0; --i) {
    const int a = p.order[i];
    index = index * p.shape[i] + (g[a] - p.lo[a] + p.halo[a]);
  }
  return index;
}

// For every owned point i (x fastest over the owned box): check ? count mismatches : write.
__global__ void index_kernel(uint64_t* buf, symcommPencilInfo_t p, int64_t nx, int64_t ny,
                             bool check, unsigned long long* bad) {
  const int64_t ex = p.hi[0] - p.lo[0], ey = p.hi[1] - p.lo[1], ez = p.hi[2] - p.lo[2];
  const int64_t total = ex * ey * ez;
  unsigned long long wrong = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t x = p.lo[0] + i % ex, y = p.lo[1] + i / ex % ey, z = p.lo[2] + i / (ex * ey);
    const uint64_t want = static_cast<uint64_t>((z * ny + y) * nx + x);
    uint64_t& e = buf[pencil_index(p, x, y, z)];
    if (!check) e = want;
    else wrong += e != want;
  }
  if (check && wrong) atomicAdd(bad, wrong);
}

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

bool op_wanted(const DecompOptions& o, const TimedOp& op) {
  return o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), op.key) != o.ops.end();
}

int64_t owned(const symcommPencilInfo_t& p) {
  return (p.hi[0] - p.lo[0]) * (p.hi[1] - p.lo[1]) * (p.hi[2] - p.lo[2]);
}

// What a rank sends to others in the transpose between pencils a and b: its pencil less the
// block it keeps.
int64_t sent_elements(const symcommPencilInfo_t& a, const symcommPencilInfo_t& b) {
  int64_t kept = 1;
  for (int d = 0; d < 3; ++d)
    kept *= std::max<int64_t>(0, std::min(a.hi[d], b.hi[d]) - std::max(a.lo[d], b.lo[d]));
  return owned(a) - kept;
}

std::string grid_name(int pr, int pc) { return std::to_string(pr) + "x" + std::to_string(pc); }

// The record's "layout" (a JSON string): how the pencils lie in memory.
std::string layout_json(const DecompOptions& o) {
  return o.contiguous ? "\"axis_contiguous\"" : "\"x_fastest\"";
}

std::string shape_of(int64_t n, int pr, int pc) {
  const std::string ns = std::to_string(n);
  return "[" + ns + "," + ns + "," + ns + "] " + std::to_string(pr) + " x " + std::to_string(pc);
}

class Runner {
 public:
  explicit Runner(Context& ctx) : ctx_(ctx) {
    BENCH_CUDA(cudaMalloc(&bad_, sizeof *bad_));
  }
  ~Runner() { cudaFree(bad_); }

  // Runs one backend on one configuration; ran = false where the backend cannot run here.
  Result run(const Config& cfg, const std::string& backend) {
    Result r;
    r.backend = backend;
    const DecompOptions& o = ctx_.opt.decomp;
    symcommDecompConfig_t c;
    BENCH_SC(symcommDecompConfigInit(&c));
    for (int a = 0; a < 3; ++a) {
      c.gdims[a] = cfg.n;
      c.axis_contiguous[a] = o.contiguous ? 1 : 0;
    }
    c.pdims[0] = cfg.pr;
    c.pdims[1] = cfg.pc;
    std::snprintf(c.backend, sizeof c.backend, "%s", backend.c_str());
    symcommDecomp_t d = nullptr;
    if (symcommDecompCreate(ctx_.comm, &c, &d) != symcommSuccess) {
      if (ctx_.rank == 0)
        std::printf("  (%s skipped on %dx%d: %s)\n", backend.c_str(), cfg.pr, cfg.pc,
                    symcommGetLastError());
      return r;
    }
    r.ran = true;
    symcommPencilInfo_t p[3];
    int64_t most = 0;
    for (int a = 0; a < 3; ++a) {
      BENCH_SC(symcommDecompPencilInfo(d, a, nullptr, nullptr, &p[a]));
      most = std::max(most, p[a].size);
    }
    const size_t e = 8;  // C32 and R64 alike
    const size_t bytes = static_cast<size_t>(max_over_ranks(ctx_, static_cast<double>(most))) * e;
    size_t ws_bytes = 0;
    BENCH_SC(symcommDecompWorkspaceSize(d, cfg.type, &ws_bytes));
    void* ws = nullptr;
    BENCH_SC(symcommMalloc(ctx_.comm, ws_bytes, &ws));
    void* buf[3];
    for (void*& b : buf) b = alloc(bytes);

    // The check: X -> Y -> Z -> Y -> X, each output poisoned and then compared with the index.
    index_pass(buf[0], p[0], cfg.n, false);
    const int steps[4][3] = {{0, 1, 1}, {1, 2, 2}, {2, 1, 1}, {1, 0, 0}};  // from, to, buffer
    const int in_buf[4] = {0, 1, 2, 1};
    unsigned long long wrong = 0;
    for (int s = 0; s < 4; ++s) {
      const int out = steps[s][2];
      BENCH_CUDA(cudaMemsetAsync(buf[out], 0xff, bytes, ctx_.stream));
      BENCH_SC(symcommDecompTranspose(d, steps[s][0], steps[s][1], buf[in_buf[s]], buf[out], ws,
                                      cfg.type, nullptr, nullptr, nullptr, nullptr, ctx_.stream));
      wrong += index_pass(buf[out], p[steps[s][1]], cfg.n, true);
    }
    r.verified = max_over_ranks(ctx_, static_cast<double>(wrong)) == 0;

    // Timing: each transpose chosen by --ops, from the buffer of its input pencil into that
    // of its output (the data is the round trip's; its values do not matter here).
    const size_t pencil_bytes = static_cast<size_t>(owned(p[0])) * e;
    const int inner = static_cast<int>(
        std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(pencil_bytes, 1), 4, 50));
    for (int k = 0; k < kNumOps; ++k) {
      const TimedOp& op = kTimedOps[k];
      if (!op_wanted(o, op)) continue;
      const auto call = [&] {
        return symcommDecompTranspose(d, op.from, op.to, buf[op.from], buf[op.to], ws, cfg.type,
                                      nullptr, nullptr, nullptr, nullptr, ctx_.stream);
      };
      double us = 0, host = 0;
      if (!o.graph) {
        BENCH_SC(symcommHostBarrier(ctx_.comm));
        us = time_stream_us(ctx_.stream, ctx_.opt.warmup, ctx_.opt.iters, inner,
                            [&] { BENCH_SC(call()); }, &host);
      } else if (!time_graph(cfg, p, buf, bytes, op, inner, call, &r, &us, &host)) {
        continue;  // not captured on some rank: no time for this transpose
      }
      r.timed[k] = true;
      r.us[k] = max_over_ranks(ctx_, us);
      r.host_us[k] = max_over_ranks(ctx_, host);
      const int64_t sent = sent_elements(p[op.from], p[op.to]) * static_cast<int64_t>(e);
      r.bytes[k] = static_cast<size_t>(max_over_ranks(ctx_, static_cast<double>(sent)));
    }
    BENCH_CUDA(cudaStreamSynchronize(ctx_.stream));
    for (void* b : buf) release(b);
    BENCH_SC(symcommFree(ctx_.comm, ws));
    BENCH_SC(symcommDecompDestroy(d));
    return r;
  }

 private:
  // --graph: `inner` calls of the transpose captured into one CUDA graph per rank; the replay
  // checked on fresh index data (every call of the batch writes the same output from the same
  // input), then timed by replays (*us and *host per call). False, with a line on rank 0,
  // where some rank could not capture it: every rank then skips it (a replayed graph whose
  // barriers some peer does not run would wait for that peer). A wrong replay clears
  // r->verified.
  bool time_graph(const Config& cfg, const symcommPencilInfo_t* p, void* const* buf,
                  size_t bytes, const TimedOp& op, int inner,
                  const std::function<symcommResult_t()>& call, Result* r, double* us,
                  double* host) {
    BENCH_SC(symcommHostBarrier(ctx_.comm));
    const GraphBatch g(ctx_.stream, inner, call);
    if (max_over_ranks(ctx_, g.ok() ? 0 : 1) > 0) {
      if (ctx_.rank == 0)
        std::printf("  (%s %s on %dx%d: no CUDA graph of it on some rank%s%s)\n",
                    r->backend.c_str(), op.name, cfg.pr, cfg.pc, g.ok() ? "" : ": ",
                    g.ok() ? "" : g.why().c_str());
      return false;
    }
    index_pass(buf[op.from], p[op.from], cfg.n, false);
    BENCH_CUDA(cudaMemsetAsync(buf[op.to], 0xff, bytes, ctx_.stream));
    BENCH_SC(symcommHostBarrier(ctx_.comm));
    g.launch();
    const auto wrong = index_pass(buf[op.to], p[op.to], cfg.n, true);
    if (max_over_ranks(ctx_, static_cast<double>(wrong)) != 0) r->verified = false;
    BENCH_SC(symcommHostBarrier(ctx_.comm));
    // The first replay uploads the graph: at least two untimed.
    const double batch = time_stream_us(ctx_.stream, std::max(2, ctx_.opt.warmup), ctx_.opt.iters,
                                        1, [&] { g.launch(); }, host);
    *us = batch / inner;
    *host /= inner;
    return true;
  }

  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (ctx_.opt.decomp.local) BENCH_CUDA(cudaMalloc(&p, bytes));
    else BENCH_SC(symcommMalloc(ctx_.comm, bytes, &p));
    return p;
  }
  void release(void* p) {
    if (ctx_.opt.decomp.local) BENCH_CUDA(cudaFree(p));
    else BENCH_SC(symcommFree(ctx_.comm, p));
  }

  // Writes the index into the owned points of `buf`, or counts the points that differ.
  unsigned long long index_pass(void* buf, const symcommPencilInfo_t& p, int64_t n, bool check) {
    BENCH_CUDA(cudaMemsetAsync(bad_, 0, sizeof *bad_, ctx_.stream));
    index_kernel<<<1024, 256, 0, ctx_.stream>>>(static_cast<uint64_t*>(buf), p, n, n, check, bad_);
    BENCH_CUDA(cudaGetLastError());
    unsigned long long wrong = 0;
    BENCH_CUDA(cudaMemcpyAsync(&wrong, bad_, sizeof wrong, cudaMemcpyDeviceToHost, ctx_.stream));
    BENCH_CUDA(cudaStreamSynchronize(ctx_.stream));
    return wrong;
  }

  Context& ctx_;
  unsigned long long* bad_ = nullptr;
};

// ---- The autotuner against the bench's measurements ----------------------------------------

constexpr double kAutotuneTarget = 1.05;  // the pick within 5% of the best measured

// One (grid, backend) the bench ran for the current size and type.
struct Measured {
  int pr, pc;
  Result r;
};

// The autotuner's score with equal weights is X->Y + Y->Z + Z->Y + Y->X: by default the bench
// times all four and compares the pick and the best on that sum. With --ops naming fewer,
// both are compared on the sum of those timed (every configuration times the same ones).
double measured_us(const Result& r) {
  double sum = 0;
  for (int k = 0; k < kNumOps; ++k) sum += r.timed[k] ? r.us[k] : 0;
  return sum;
}
size_t measured_bytes(const Result& r) {
  size_t sum = 0;
  for (int k = 0; k < kNumOps; ++k) sum += r.timed[k] ? r.bytes[k] : 0;
  return sum;
}

// "transpose_xy+transpose_yz+...": the ops measured_us adds up.
std::string ops_summed(const DecompOptions& o) {
  std::string out;
  for (const TimedOp& op : kTimedOps)
    if (op_wanted(o, op)) out += (out.empty() ? "" : "+") + std::string(op.name);
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// Sets an environment variable for its lifetime, then puts back what was there (or nothing),
// so that a caller's own SYMCOMM_DECOMP_AUTOTUNE_* outlive the check.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_;
};

struct Pick {
  bool ok = false;
  int pr = 0, pc = 0;
  std::string backend;
  std::string why;  // where autotuning failed
};

// What the autotuner picks among the grids and backends the bench measured. The candidate
// lists are parameters read from each rank's own environment, hence set on every rank (this
// runs on all of them). Same layout as the bench; the autotuner's own buffers are symmetric.
Pick autotune(const Context& ctx, const Config& cfg, const std::vector<std::string>& grids,
              const std::vector<std::string>& backends) {
  const ScopedEnv g("SYMCOMM_DECOMP_AUTOTUNE_GRIDS", join(grids));
  const ScopedEnv b("SYMCOMM_DECOMP_AUTOTUNE_BACKENDS", join(backends));
  symcommDecompConfig_t c;
  BENCH_SC(symcommDecompConfigInit(&c));
  for (int a = 0; a < 3; ++a) {
    c.gdims[a] = cfg.n;
    c.axis_contiguous[a] = ctx.opt.decomp.contiguous ? 1 : 0;
  }
  c.pdims[0] = c.pdims[1] = 0;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  c.autotune_type = cfg.type;
  for (double& w : c.autotune_weights) w = 1.0;
  Pick p;
  symcommDecomp_t d = nullptr;
  if (symcommDecompCreate(ctx.comm, &c, &d) != symcommSuccess) {
    p.why = symcommGetLastError();
    return p;
  }
  symcommDecompConfig_t chosen;
  BENCH_SC(symcommDecompGetConfig(d, &chosen));
  const char* name = nullptr;
  BENCH_SC(symcommDecompGetBackend(d, &name));
  p.ok = true;
  p.pr = chosen.pdims[0];
  p.pc = chosen.pdims[1];
  p.backend = name;
  BENCH_SC(symcommDecompDestroy(d));
  return p;
}

// The bench's run of the pick, or null where the bench did not run it.
const Measured* run_of(const std::vector<Measured>& all, const Pick& p) {
  for (const Measured& m : all)
    if (m.r.ran && m.pr == p.pr && m.pc == p.pc && m.r.backend == p.backend) return &m;
  return nullptr;
}

// The fastest run, among the verified ones: a configuration that computes the wrong result
// is nobody's best.
const Measured* fastest(const std::vector<Measured>& all) {
  const Measured* best = nullptr;
  for (const Measured& m : all)
    if (m.r.ran && m.r.verified && (!best || measured_us(m.r) < measured_us(best->r))) best = &m;
  return best;
}

std::string json_us(const Measured* m) {
  if (!m) return "null";
  char v[32];
  std::snprintf(v, sizeof v, "%.3f", measured_us(m->r));
  return v;
}

// "2x2 fused (412.3 us)", or "2x2 fused (not measured by the bench)".
std::string describe(int pr, int pc, const std::string& backend, const Measured* m) {
  char t[64] = "not measured by the bench";
  if (m) std::snprintf(t, sizeof t, "%.1f us", measured_us(m->r));
  return grid_name(pr, pc) + " " + backend + " (" + t + ")";
}

// The line on rank 0 and the record. A pick the bench did not run gets no time (time_us -1,
// ratio null, pick_measured false): a number from elsewhere would not be comparable.
void report_autotune(const Context& ctx, const Config& cfg, const Pick& pick,
                     const std::vector<Measured>& all) {
  if (!pick.ok) {
    if (ctx.rank == 0) std::printf("autotune: failed: %s\n", pick.why.c_str());
    return;
  }
  const Measured* mine = run_of(all, pick);
  const Measured* best = fastest(all);
  const double ratio = mine && best ? measured_us(mine->r) / measured_us(best->r) : -1;
  if (ctx.rank == 0) {
    std::string line = "autotune: picked " + describe(pick.pr, pick.pc, pick.backend, mine) +
                       "; best measured " +
                       (best ? describe(best->pr, best->pc, best->r.backend, best) : "none");
    char tail[96] = "; pick/best -";
    if (ratio > 0)
      std::snprintf(tail, sizeof tail, "; pick/best %.3f (target <= %.2f%s)", ratio,
                    kAutotuneTarget, ratio <= kAutotuneTarget ? "" : ": missed");
    std::printf("%s%s\n", line.c_str(), tail);
    std::fflush(stdout);
  }
  Record rec;
  rec.bench = "decomp";
  rec.op = "autotune";
  rec.impl = "symcomm:" + pick.backend;
  rec.dtype = cfg.dtype;
  rec.shape = shape_of(cfg.n, pick.pr, pick.pc);
  rec.bytes = mine ? measured_bytes(mine->r) : 0;  // as time_us: the timed transposes summed
  rec.ranks = ctx.nranks;
  rec.time_us = mine ? measured_us(mine->r) : -1;
  rec.iters = ctx.opt.iters;
  rec.warmup = ctx.opt.warmup;
  char r[32] = "null";
  if (ratio > 0) std::snprintf(r, sizeof r, "%.4f", ratio);
  rec.extra = {{"n", std::to_string(cfg.n)},
               {"grid", "\"" + grid_name(pick.pr, pick.pc) + "\""},
               {"buffers", ctx.opt.decomp.local ? "\"local\"" : "\"symmetric\""},
               {"layout", layout_json(ctx.opt.decomp)},
               {"pick_measured", mine ? "true" : "false"},
               {"best_impl", best ? "\"symcomm:" + best->r.backend + "\"" : "null"},
               {"best_grid", best ? "\"" + grid_name(best->pr, best->pc) + "\"" : "null"},
               {"best_time_us", json_us(best)},
               {"ratio", r},
               {"ops_summed", "\"" + ops_summed(ctx.opt.decomp) + "\""}};
  write_json(ctx, rec);
}

}  // namespace

bool decomp_option(Options& opt, int argc, char** argv, int& i) {
  DecompOptions& o = opt.decomp;
  const char* name = argv[i];
  auto arg = [&]() -> const char* {
    if (i + 1 >= argc) bad_option(name, "", "needs a value");
    return argv[++i];
  };
  if (!std::strcmp(name, "--sizes")) {
    const char* v = arg();
    o.sizes.clear();
    for (const std::string& s : split(v)) o.sizes.push_back(to_int(name, s, 1, 1 << 16));
    if (o.sizes.empty()) bad_option(name, v, "names no size");
  } else if (!std::strcmp(name, "--max-n")) {
    o.max_n = to_int(name, arg(), 1, 1 << 16);
  } else if (!std::strcmp(name, "--dtypes")) {
    const char* v = arg();
    o.dtypes = split(v);
    for (const std::string& t : o.dtypes)
      if (t != "c32" && t != "r64") bad_option(name, v, "'" + t + "' is not c32 or r64");
    if (o.dtypes.empty()) bad_option(name, v, "names no type");
  } else if (!std::strcmp(name, "--grids")) {
    const char* v = arg();
    o.grids = split(v);
    for (const std::string& g : o.grids) {
      const size_t x = g.find('x');
      if (x == std::string::npos) bad_option(name, v, "'" + g + "' is not PRxPC");
      to_int(name, g.substr(0, x), 1, 1 << 20);
      to_int(name, g.substr(x + 1), 1, 1 << 20);
    }
  } else if (!std::strcmp(name, "--backends")) {
    const char* v = arg();
    o.backends = split(v);
    for (std::string& b : o.backends) {
      if (b.rfind("symcomm:", 0) == 0) b = b.substr(8);
      if (!registered(b)) bad_option(name, v, "'" + b + "' is not a registered backend");
    }
  } else if (!std::strcmp(name, "--local-buffers")) {
    o.local = true;
  } else if (!std::strcmp(name, "--contiguous")) {
    o.contiguous = true;
  } else if (!std::strcmp(name, "--ops")) {
    const char* v = arg();
    o.ops = split(v);
    for (const std::string& k : o.ops)
      if (std::none_of(std::begin(kTimedOps), std::end(kTimedOps),
                       [&](const TimedOp& op) { return k == op.key; }))
        bad_option(name, v, "'" + k + "' is not xy, yz, zy or yx");
    if (o.ops.empty()) bad_option(name, v, "names no transpose");
  } else if (!std::strcmp(name, "--no-autotune")) {
    autotune_check = false;
  } else if (!std::strcmp(name, "--graph")) {
    o.graph = true;
  } else {
    return false;
  }
  return true;
}

int run_decomp(Context& ctx) {
  const DecompOptions& o = ctx.opt.decomp;
  // The nccl backend first, so that every other row can say how it compares.
  std::vector<std::string> backends;
  for (int i = 0; i < symcommDecompBackendCount(); ++i) {
    const std::string b = symcommDecompBackendName(i);
    const auto& only = o.backends;
    if (!only.empty() && std::find(only.begin(), only.end(), b) == only.end()) continue;
    if (b == "nccl") backends.insert(backends.begin(), b);
    else backends.push_back(b);
  }
  const std::vector<std::string> dtypes =
      o.dtypes.empty() ? std::vector<std::string>{"c32", "r64"} : o.dtypes;
  if (ctx.rank == 0)
    std::printf("symcomm-bench decomp: %d ranks, %s pencils, %s%s\n", ctx.nranks,
                o.local ? "cudaMalloc'd" : "symmetric",
                o.contiguous ? "axis-contiguous" : "x fastest",
                o.graph ? ", each batch one replayed CUDA graph (no autotune check)" : "");
  Runner runner(ctx);
  int failures = 0;
  for (int64_t n : o.sizes) {
    if (o.max_n && n > o.max_n) continue;
    for (const std::string& dt : dtypes) {
      if (ctx.rank == 0) {
        std::printf("\n%lld^3 %s\n%-13s %-22s %-6s %14s %12s %10s %8s %8s %s\n",
                    static_cast<long long>(n), dt.c_str(), "op", "impl", "grid", "bytes/rank",
                    "time us", "GB/s/GPU", "vs nccl", "host us", "check");
        std::fflush(stdout);
      }
      const auto t0 = std::chrono::steady_clock::now();
      const bool c32 = dt == "c32";
      const symcommDecompType_t type = c32 ? symcommC32 : symcommR64;
      std::vector<Measured> measured;  // every backend on every grid, for the autotune check
      std::vector<std::string> grids;  // the grids run: the autotuner's candidates
      for (int pr = 1; pr <= ctx.nranks; ++pr) {
        if (ctx.nranks % pr) continue;
        const int pc = ctx.nranks / pr;
        const std::string grid = grid_name(pr, pc);
        if (!o.grids.empty() && std::find(o.grids.begin(), o.grids.end(), grid) == o.grids.end())
          continue;
        if (pr > n || pc > n) continue;  // a part without points
        const Config cfg{n, type, c32 ? "c32" : "f64", pr, pc};
        std::vector<Result> results;
        for (const std::string& b : backends) {
          results.push_back(runner.run(cfg, b));
          failures += results.back().ran && !results.back().verified;
          measured.push_back({pr, pc, results.back()});
        }
        grids.push_back(grid);
        // The baseline: the nccl backend, where it ran and its round trip was right (its
        // times are compared per transpose below, where it timed that transpose).
        const Result* nccl = nullptr;
        for (const Result& r : results)
          if (r.backend == "nccl" && r.ran && r.verified) nccl = &r;
        for (int op = 0; op < kNumOps; ++op)
          for (const Result& r : results) {
            if (!r.ran || !r.timed[op]) continue;
            Record rec;
            rec.bench = "decomp";
            rec.op = kTimedOps[op].name;
            rec.impl = "symcomm:" + r.backend;
            rec.dtype = cfg.dtype;
            rec.shape = shape_of(n, pr, pc);
            rec.bytes = r.bytes[op];
            rec.ranks = ctx.nranks;
            rec.time_us = r.us[op];
            rec.algbw_gbs = r.us[op] > 0 ? static_cast<double>(r.bytes[op]) / (r.us[op] * 1e3) : -1;
            rec.iters = ctx.opt.iters;
            rec.warmup = ctx.opt.warmup;
            rec.extra.push_back({"n", std::to_string(n)});
            rec.extra.push_back({"grid", "\"" + grid + "\""});
            rec.extra.push_back({"buffers", o.local ? "\"local\"" : "\"symmetric\""});
            rec.extra.push_back({"layout", layout_json(o)});
            rec.extra.push_back({"verified", r.verified ? "true" : "false"});
            rec.extra.push_back({"launch", o.graph ? "\"graph\"" : "\"eager\""});
            char host[32];
            std::snprintf(host, sizeof host, "%.3f", r.host_us[op]);
            rec.extra.push_back({"host_us", host});
            double speedup = -1;
            // (With --graph a transpose the nccl backend could not capture has no time: 0.)
            if (nccl && nccl->timed[op] && nccl->us[op] > 0 && r.us[op] > 0) {
              speedup = nccl->us[op] / r.us[op];
              char v[32];
              std::snprintf(v, sizeof v, "%.3f", speedup);
              rec.extra.push_back({"speedup_vs_nccl", v});
            }
            if (ctx.rank == 0) {
              char vs[32] = "-";
              if (speedup > 0) std::snprintf(vs, sizeof vs, "%.2fx", speedup);
              std::printf("%-13s %-22s %-6s %14zu %12.1f %10.1f %8s %8.1f %s\n", rec.op.c_str(),
                          rec.impl.c_str(), grid.c_str(), rec.bytes, rec.time_us, rec.algbw_gbs,
                          vs, r.host_us[op], r.verified ? "ok" : "WRONG");
              std::fflush(stdout);
            }
            write_json(ctx, rec);
          }
      }
      // The autotuner times eager calls: its pick is compared with eager times only.
      if (autotune_check && !o.graph && !grids.empty()) {
        const Config cfg{n, type, c32 ? "c32" : "f64", 0, 0};  // pdims chosen by the autotuner
        report_autotune(ctx, cfg, autotune(ctx, cfg, grids, backends), measured);
      }
      if (ctx.rank == 0) {
        std::printf("# %lld^3 %s: %.1f s\n", static_cast<long long>(n), dt.c_str(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        std::fflush(stdout);
      }
    }
  }
  if (failures && ctx.rank == 0)
    std::fprintf(stderr, "symcomm-bench decomp: %d configuration(s) failed the round-trip check\n",
                 failures);
  return failures ? 1 : 0;
}

}  // namespace bench
