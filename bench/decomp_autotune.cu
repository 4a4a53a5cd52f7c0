// symcomm-bench decomp: the autotuner against the bench's measurements. Per (size, dtype),
// symcommDecompCreate with pdims 0 x 0 and backend "auto" among the grids and backends the
// bench ran, and the pick's timed transposes compared with those of the best configuration
// measured (target: within 5%).
#include <cstdio>
#include <cstdlib>

#include "decomp_bench.h"

namespace bench::decomp {

namespace {

constexpr double kAutotuneTarget = 1.05;  // the pick within 5% of the best measured

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

}  // namespace

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

}  // namespace bench::decomp
