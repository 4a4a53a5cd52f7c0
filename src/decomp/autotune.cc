// Autotuning a decomposition: every candidate process grid times every candidate backend on
// the four transposes (CUDA events around each on GPUs); the best (lowest weighted time of
// the slowest rank) wins.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "base/param.h"
#include "decomp/decomp.h"

namespace symcomm {

static const StringParam kGrids("SYMCOMM_DECOMP_AUTOTUNE_GRIDS", "",
                                "process grids the autotuner may try, e.g. 2x4,1x8 (empty: all)");
static const StringParam kBackends("SYMCOMM_DECOMP_AUTOTUNE_BACKENDS", "",
                                   "decomposition backends the autotuner may try (empty: all)");

namespace {

bool listed(const std::string& list, const std::string& item) {
  if (list.empty()) return true;
  size_t at = 0;
  while (at <= list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    if (list.compare(at, end - at, item) == 0 && end - at == item.size()) return true;
    at = end + 1;
  }
  return false;
}

size_t elem_bytes(symcommDecompType_t t) { return t == symcommR32 ? 4 : t == symcommC64 ? 16 : 8; }

struct Candidate {
  int pr, pc;
  std::string backend;
  double score_us = -1;  // -1: not run; -2: skipped; -3: cannot run here
};

// Runs one candidate: warm-up rounds, then timed rounds. Returns the score, or -2 when the
// warm-up already shows it `skip` times slower than `best`.
double measure(const DecompLayers& layers, const symcommDecompConfig_t& c, double best) {
  std::unique_ptr<Decomp> d = Decomp::create(layers, c);
  const size_t e = elem_bytes(c.autotune_type);
  const DecompContext ctx = d->context();
  int64_t most = 0;
  for (int a = 0; a < 3; ++a) most = std::max(most, d->geometry().pencil(d->rank(), a, nullptr, nullptr).size);
  // Symmetric buffers, so that every memory space can hold them; the same on every rank.
  int64_t largest = most;
  std::vector<int64_t> all(static_cast<size_t>(layers.topology.nranks));
  layers.bootstrap.allgather(&most, sizeof most, all.data());
  for (int64_t v : all) largest = std::max(largest, v);
  Heap& heap = layers.heap;
  char* buf[2] = {static_cast<char*>(heap.malloc(static_cast<size_t>(largest) * e)),
                  static_cast<char*>(heap.malloc(static_cast<size_t>(largest) * e))};
  char* ws = static_cast<char*>(heap.malloc(d->backend().transpose_workspace(ctx, e)));
  const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
  std::vector<double> scores;
  double result = 0;
  for (int round = 0; round < c.autotune_warmup + c.autotune_trials; ++round) {
    double weighted = 0;
    for (int s = 0; s < 4; ++s) {
      TransposeCall t{};
      t.from = steps[s][0];
      t.to = steps[s][1];
      t.input = buf[s % 2];
      t.output = buf[1 - s % 2];
      t.workspace = ws;
      t.elem = e;
      t.in = d->geometry().pencil(d->rank(), t.from, nullptr, nullptr);
      t.out = d->geometry().pencil(d->rank(), t.to, nullptr, nullptr);
      double us = layers.rma.backend().time_us(nullptr, [&] { d->backend().transpose(ctx, t); });
      std::vector<double> times(static_cast<size_t>(layers.topology.nranks));
      layers.bootstrap.allgather(&us, sizeof us, times.data());  // the slowest rank counts
      weighted += c.autotune_weights[s] * *std::max_element(times.begin(), times.end());
    }
    if (round < c.autotune_warmup) {
      if (best > 0 && weighted > c.autotune_skip * best) {
        result = -2;
        break;
      }
      continue;
    }
    scores.push_back(weighted);
  }
  if (result == 0) {
    std::sort(scores.begin(), scores.end());
    result = scores.empty() ? -2 : scores[scores.size() / 2];
  }
  heap.free(ws);
  heap.free(buf[1]);
  heap.free(buf[0]);
  return result;
}

}  // namespace

std::unique_ptr<Decomp> Decomp::autotune(const DecompLayers& layers,
                                         const symcommDecompConfig_t& config) {
  const int n = layers.topology.nranks;
  const bool grid_open = config.pdims[0] == 0 && config.pdims[1] == 0;
  const std::string wanted(config.backend, strnlen(config.backend, sizeof config.backend));
  const bool backend_open = wanted == "auto";
  SYMCOMM_REQUIRE(config.autotune_trials >= 1 && config.autotune_warmup >= 0 &&
                      config.autotune_skip >= 1.0,
                  symcommInvalidArgument,
                  "autotune_trials %d must be >= 1, autotune_warmup %d >= 0, autotune_skip %g >= 1",
                  config.autotune_trials, config.autotune_warmup, config.autotune_skip);
  std::vector<Candidate> candidates;
  const std::string grids = kGrids.get(), backends = kBackends.get();
  for (int pr = 1; pr <= n; ++pr) {
    if (n % pr) continue;
    const int pc = n / pr;
    if (!grid_open && (pr != config.pdims[0] || pc != config.pdims[1])) continue;
    if (grid_open && !listed(grids, std::to_string(pr) + "x" + std::to_string(pc))) continue;
    for (DecompBackend* b : decomp_backends()) {
      if (backend_open ? !listed(backends, b->name()) : !(wanted.empty() ? b == decomp_backends().front()
                                                                         : wanted == b->name()))
        continue;
      candidates.push_back(Candidate{pr, pc, b->name()});
    }
  }
  // Rows of consecutive ranks first: pc as large as possible (the grid 1 x n) first.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.pc > b.pc; });
  SYMCOMM_REQUIRE(!candidates.empty(), symcommInvalidArgument,
                  "the autotuner has no candidate (SYMCOMM_DECOMP_AUTOTUNE_GRIDS='%s', "
                  "SYMCOMM_DECOMP_AUTOTUNE_BACKENDS='%s', backend '%s')", grids.c_str(),
                  backends.c_str(), wanted.c_str());
  const bool talk = layers.topology.rank == 0;
  double best = 0;
  const Candidate* winner = nullptr;
  for (Candidate& cand : candidates) {
    symcommDecompConfig_t c = config;
    c.pdims[0] = cand.pr;
    c.pdims[1] = cand.pc;
    std::snprintf(c.backend, sizeof c.backend, "%s", cand.backend.c_str());
    try {
      cand.score_us = measure(layers, c, best);
    } catch (const Error& e) {
      if (e.code() != symcommInvalidArgument && e.code() != symcommNotSupported) throw;
      cand.score_us = -3;  // this grid does not fit the dimensions, or the backend cannot run
    }
    if (cand.score_us > 0 && (!winner || cand.score_us < best)) {
      best = cand.score_us;
      winner = &cand;
    }
    if (talk)
      std::fprintf(stderr, "symcomm autotune: grid %dx%d backend %-14s %s\n", cand.pr, cand.pc,
                   cand.backend.c_str(),
                   cand.score_us > 0 ? format("%.1f us", cand.score_us).c_str()
                   : cand.score_us == -2 ? "skipped (slower than the best after warm-up)"
                                         : "cannot run");
  }
  SYMCOMM_REQUIRE(winner, symcommNotSupported, "no autotuning candidate could run");
  if (talk) {
    std::fprintf(stderr, "symcomm autotune: %-8s %-14s %s\n", "grid", "backend", "score (us)");
    for (const Candidate& cand : candidates)
      std::fprintf(stderr, "symcomm autotune: %3dx%-4d %-14s %s%s\n", cand.pr, cand.pc,
                   cand.backend.c_str(),
                   cand.score_us > 0 ? format("%.1f", cand.score_us).c_str() : "-",
                   &cand == winner ? "  <- chosen" : "");
  }
  symcommDecompConfig_t chosen = config;
  chosen.pdims[0] = winner->pr;
  chosen.pdims[1] = winner->pc;
  std::snprintf(chosen.backend, sizeof chosen.backend, "%s", winner->backend.c_str());
  return create(layers, chosen);
}

}  // namespace symcomm
