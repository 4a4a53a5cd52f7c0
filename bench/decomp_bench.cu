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
//
// This file holds the run loop and the records of each transpose; the options are in
// decomp_options.cc, the check and the timing of one configuration in decomp_runner.cu and
// the autotuner's check in decomp_autotune.cu.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "decomp_bench.h"

namespace bench {

using namespace decomp;  // TimedOp, Config, Result, Runner and the autotune check (decomp_bench.h)

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
      if (o.autotune && !o.graph && !grids.empty()) {
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
