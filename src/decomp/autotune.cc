// Autotuning a decomposition (docs/decomp.md, "Autotuning"): first the process grid and the
// transpose backend, every candidate grid x backend timed on the four transposes; then, where
// asked for, the halo backend, every candidate timed on halo exchanges on the chosen grid.
// Times are RmaBackend::time_us (CUDA events around each exchange on GPUs, the clock on the
// host), the slowest rank's counting; the lowest score wins.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "base/log.h"
#include "base/param.h"
#include "decomp/decomp.h"
#include "decomp/halo.h"

namespace symcomm {

static const StringParam kGrids(
    "SYMCOMM_DECOMP_AUTOTUNE_GRIDS", "",
    "further filter on the autotuner's grids, as autotune_grids (2x4,!1x8); same on every rank");
static const StringParam kBackends(
    "SYMCOMM_DECOMP_AUTOTUNE_BACKENDS", "",
    "further filter on the autotuner's backends, as autotune_backends (!nccl); same on every rank");

namespace {

std::string field(const char* text, size_t size) { return std::string(text, strnlen(text, size)); }

// An include/exclude filter: plain entries include (only they remain where there is one),
// entries starting with '!' exclude.
struct Filter {
  std::vector<std::string> include, exclude;
  bool allows(const std::string& item) const {
    return !has(exclude, item) && (include.empty() || has(include, item));
  }
  // An including entry names `item` (not merely no entry excludes it).
  bool names(const std::string& item) const { return has(include, item) && !has(exclude, item); }

 private:
  static bool has(const std::vector<std::string>& v, const std::string& item) {
    return std::find(v.begin(), v.end(), item) != v.end();
  }
};

// "PxQ" as the autotuner writes grids ("02x4" is "2x4"), or "" where `entry` is not one.
std::string grid_name(const std::string& entry) {
  int pr = 0, pc = 0, used = 0;
  if (std::sscanf(entry.c_str(), "%dx%d%n", &pr, &pc, &used) != 2 ||
      used != static_cast<int>(entry.size()) || pr < 1 || pc < 1)
    return "";
  return std::to_string(pr) + "x" + std::to_string(pc);
}

std::string backend_name(const std::string& entry) {
  for (DecompBackend* b : decomp_backends())
    if (entry == b->name()) return entry;
  return "";
}

// Parses `text` (comma-separated, blanks around entries ignored) from `source`; every entry
// goes through `canonical`, which returns "" for one that is not `expected`.
Filter parse_filter(const std::string& text, const char* source,
                    std::string (*canonical)(const std::string&), const char* expected) {
  Filter f;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    std::string entry = text.substr(at, end - at);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    const bool exclude = !entry.empty() && entry[0] == '!';
    const std::string name = canonical(entry.substr(exclude ? 1 : 0));
    SYMCOMM_REQUIRE(!name.empty(), symcommInvalidArgument,
                    "%s '%s': entry '%s' is not %s (optionally after '!')", source, text.c_str(),
                    entry.c_str(), expected);
    (exclude ? f.exclude : f.include).push_back(name);
    at = end + 1;
  }
  return f;
}

// The environment's filter `p`, checked to be the same on every rank: ranks with different
// candidates would time different exchanges and wait for each other forever.
std::string agreed_env(const DecompLayers& layers, const StringParam& p) {
  const std::string mine = p.get();
  uint64_t bytes = mine.size();
  layers.bootstrap.broadcast(&bytes, sizeof bytes, 0);
  std::string root = mine;
  root.resize(bytes);
  if (bytes) layers.bootstrap.broadcast(root.data(), bytes, 0);
  layers.bootstrap.agree(root == mine ? symcommSuccess : symcommInvalidUsage,
                         format("%s is '%s' here but '%s' on rank 0: set it the same on every "
                                "rank, or on none", p.name(), mine.c_str(), root.c_str()));
  return mine;
}

// Checks what the autotuner reads (the same on every rank: checked before).
void validate(const symcommDecompConfig_t& c, bool halo_open) {
  SYMCOMM_REQUIRE(c.autotune_type == symcommR32 || c.autotune_type == symcommR64 ||
                      c.autotune_type == symcommC32 || c.autotune_type == symcommC64,
                  symcommInvalidArgument,
                  "autotune_type %d is not a symcommDecompType_t (R32, R64, C32 or C64)",
                  static_cast<int>(c.autotune_type));
  SYMCOMM_REQUIRE(c.autotune_trials >= 1 && c.autotune_warmup >= 0 && c.autotune_skip >= 1.0,
                  symcommInvalidArgument,
                  "autotune_trials %d must be >= 1, autotune_warmup %d >= 0, autotune_skip %g >= 1",
                  c.autotune_trials, c.autotune_warmup, c.autotune_skip);
  double sum = 0;
  for (int s = 0; s < 4; ++s) {
    SYMCOMM_REQUIRE(std::isfinite(c.autotune_weights[s]) && c.autotune_weights[s] >= 0,
                    symcommInvalidArgument,
                    "autotune_weights[%d] is %g: each weight must be finite and >= 0", s,
                    c.autotune_weights[s]);
    sum += c.autotune_weights[s];
  }
  SYMCOMM_REQUIRE(sum > 0, symcommInvalidArgument,
                  "autotune_weights are all 0: no transpose would count; give one a weight > 0");
  SYMCOMM_REQUIRE(c.autotune_allow_uneven == 0 || c.autotune_allow_uneven == 1,
                  symcommInvalidArgument, "autotune_allow_uneven is %d, must be 0 or 1",
                  c.autotune_allow_uneven);
  if (!halo_open) return;
  SYMCOMM_REQUIRE(c.autotune_halo_axis >= 0 && c.autotune_halo_axis < 3, symcommInvalidArgument,
                  "autotune_halo_axis is %d, must be 0, 1 or 2", c.autotune_halo_axis);
  int64_t any = 0;
  for (int a = 0; a < 3; ++a) {
    SYMCOMM_REQUIRE(c.autotune_halo_extents[a] >= 0, symcommInvalidArgument,
                    "autotune_halo_extents[%d] is %lld, must be >= 0", a,
                    static_cast<long long>(c.autotune_halo_extents[a]));
    any += c.autotune_halo_extents[a];
  }
  SYMCOMM_REQUIRE(any > 0, symcommInvalidArgument,
                  "halo_backend is \"auto\" but autotune_halo_extents are all 0: no halo "
                  "exchange to time");
}

size_t elem_bytes(symcommDecompType_t t) { return t == symcommR32 ? 4 : t == symcommC64 ? 16 : 8; }

// The largest of every rank's `mine`.
template <typename T>
T max_over_ranks(const DecompLayers& layers, T mine) {
  std::vector<T> all(static_cast<size_t>(layers.topology.nranks));
  layers.bootstrap.allgather(&mine, sizeof mine, all.data());
  return *std::max_element(all.begin(), all.end());
}

// Microseconds that `work` takes on the slowest rank.
double slowest_us(const DecompLayers& layers, const std::function<void()>& work) {
  return max_over_ranks(layers, layers.rma.backend().time_us(nullptr, work));
}

struct Candidate {
  int pr = 0, pc = 0;
  std::string backend;  // "" (transposes): the first that can run, named once it ran
  enum { kNotRun, kRan, kSkipped, kCannotRun } outcome = kNotRun;
  double score_us = 0;
  std::string why;  // kCannotRun: the error
};

// The rounds of one candidate: `round` runs one and returns its time (the slowest rank's).
// Sets the median of the timed rounds as the score, or kSkipped as soon as the median so far
// (checked after every timed round) exceeds `skip` x `best` (< 0: no best yet).
void run_rounds(const symcommDecompConfig_t& c, double best, const std::function<double()>& round,
                Candidate& cand) {
  for (int r = 0; r < c.autotune_warmup; ++r) round();
  std::vector<double> timed;
  for (int r = 0; r < c.autotune_trials; ++r) {
    timed.push_back(round());
    std::vector<double> sorted = timed;
    std::sort(sorted.begin(), sorted.end());
    cand.score_us = sorted[sorted.size() / 2];
    cand.outcome = Candidate::kRan;
    if (best >= 0 && cand.score_us > c.autotune_skip * best) {
      cand.outcome = Candidate::kSkipped;
      return;
    }
  }
}

// Failures that every rank meets alike, at the same point: the backends' and the plans'
// checks decide from what every rank shares, and the heap's state is the same on every rank
// (so is running out of it). The candidate cannot run; the others are tried.
bool agreed_failure(const Error& e) {
  return e.code() == symcommInvalidArgument || e.code() == symcommNotSupported ||
         e.code() == symcommOutOfMemory;
}

// Symmetric buffers of the same size on every rank (the largest any rank asks for), so that
// every memory space and every backend's direct path can use them, for the time of `use`'s
// body; freed collectively after it, also where it fails alike on every rank (a candidate
// that cannot run must not keep its buffers from the next; before, one that ran out of heap
// took what the others needed). Other failures end the autotuning, and the buffers stay with
// the heap: freeing is collective, and the other ranks are not freeing.
class Buffers {
 public:
  explicit Buffers(const DecompLayers& layers) : layers_(layers) {}
  char* get(size_t bytes) {
    bytes = std::max<size_t>(max_over_ranks(layers_, bytes), 1);  // the heap refuses 0 bytes
    all_.push_back(static_cast<char*>(layers_.heap.malloc(bytes)));
    return all_.back();
  }
  template <typename Body>
  void use(const Body& body) {
    try {
      body();
    } catch (const Error& e) {
      if (agreed_failure(e)) free();
      throw;
    }
    free();
  }

 private:
  void free() {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) layers_.heap.free(*it);
    all_.clear();
  }
  const DecompLayers& layers_;
  std::vector<char*> all_;
};

// A grid x backend candidate on the four transposes (those of weight > 0).
void time_transposes(const DecompLayers& layers, const symcommDecompConfig_t& c, double best,
                     Candidate& cand) {
  std::unique_ptr<Decomp> d = Decomp::create(layers, c);
  cand.backend = d->backend().name();
  const size_t e = elem_bytes(c.autotune_type);
  const DecompContext ctx = d->context();
  int64_t most = 0;
  for (int a = 0; a < 3; ++a)
    most = std::max(most, d->geometry().pencil(d->rank(), a, nullptr, nullptr).size);
  Buffers buffers(layers);
  buffers.use([&] {
    char* buf[2] = {buffers.get(static_cast<size_t>(most) * e),
                    buffers.get(static_cast<size_t>(most) * e)};
    char* ws = buffers.get(d->backend().transpose_workspace(ctx, e));
    const int steps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};
    run_rounds(c, best, [&] {
      double weighted = 0;
      for (int s = 0; s < 4; ++s) {
        if (c.autotune_weights[s] == 0) continue;
        TransposeCall t{};
        t.from = steps[s][0];
        t.to = steps[s][1];
        t.input = buf[s % 2];
        t.output = buf[1 - s % 2];
        t.workspace = ws;
        t.elem = e;
        t.in = d->geometry().pencil(d->rank(), t.from, nullptr, nullptr);
        t.out = d->geometry().pencil(d->rank(), t.to, nullptr, nullptr);
        weighted += c.autotune_weights[s] *
                    slowest_us(layers, [&] { d->backend().transpose(ctx, t); });
      }
      return weighted;
    }, cand);
  });
}

// A halo backend candidate (c.halo_backend): exchanges of the autotune_halo_axis pencil along
// every global axis of a non-zero autotune_halo_extents, one after the other.
void time_halos(const DecompLayers& layers, const symcommDecompConfig_t& c, double best,
                Candidate& cand) {
  std::unique_ptr<Decomp> d = Decomp::create(layers, c);
  DecompBackend& b = d->halo_backend();
  const DecompContext ctx = d->halo_context();
  const size_t e = elem_bytes(c.autotune_type);
  const int axis = c.autotune_halo_axis;
  const int64_t* halo = c.autotune_halo_extents;
  // Agreed: halos wider than a part fail every rank alike (the plans cover every rank).
  size_t ws_bytes = 0;
  layers.bootstrap.agree_on([&] {
    for (int dim = 0; dim < 3; ++dim)
      if (halo[dim] > 0) ws_bytes = std::max(ws_bytes, b.halo_workspace(ctx, axis, dim, e, halo, nullptr));
  });
  Buffers buffers(layers);
  buffers.use([&] {
    const symcommPencilInfo_t p = d->geometry().pencil(d->rank(), axis, halo, nullptr);
    char* buf = buffers.get(static_cast<size_t>(p.size) * e);
    char* ws = buffers.get(ws_bytes);
    run_rounds(c, best, [&] {
      double total = 0;
      for (int dim = 0; dim < 3; ++dim) {
        if (halo[dim] == 0) continue;
        HaloCall h{};
        h.axis = axis;
        h.dim = dim;
        h.buffer = buf;
        h.workspace = ws;
        h.elem = e;
        h.halo = halo;
        h.padding = nullptr;
        h.periodic = c.autotune_halo_periods[dim] != 0;
        total += slowest_us(layers, [&] { b.halo(ctx, h); });
      }
      return total;
    }, cand);
  });
}

// Why the autotuner's halo exchanges (halo_backend "auto": autotune_halo_extents around the
// autotune_halo_axis pencil) cannot run on the grid pr x pc, or "" where they can: a halo
// wider than a part along a dimension the grid splits, or a grid that does not fit the
// dimensions. The same on every rank (the plans cover every part).
std::string halo_misfit(const symcommDecompConfig_t& config, int pr, int pc, int nranks) {
  symcommDecompConfig_t c = config;
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  try {
    const Geometry g(c, nranks);
    for (int dim = 0; dim < 3; ++dim)
      if (c.autotune_halo_extents[dim] > 0)
        plan_halo(g, 0, c.autotune_halo_axis, dim, c.autotune_halo_extents, nullptr,
                  c.autotune_halo_periods[dim] != 0);
  } catch (const Error& e) {
    if (e.code() != symcommInvalidArgument) throw;
    return e.what();
  }
  return "";
}

// Times every candidate with `measure` (the configuration `config_of` makes for it), printing a
// line per candidate and then the table on rank 0 (`label` names a candidate there); returns
// the winner. A candidate that cannot run (does not fit the dimensions, or its backend cannot
// run here: agreed failures) is marked so, as is one marked so before (not measured); any
// other failure ends autotuning.
const Candidate& tune(const DecompLayers& layers, const symcommDecompConfig_t& config,
                      std::vector<Candidate>& candidates,
                      const std::function<symcommDecompConfig_t(const Candidate&)>& config_of,
                      void (*measure)(const DecompLayers&, const symcommDecompConfig_t&, double,
                                      Candidate&),
                      const std::function<std::string(const Candidate&)>& label,
                      const char* what) {
  const bool talk = layers.topology.rank == 0;
  const Candidate* winner = nullptr;
  std::string last_failure;
  for (Candidate& cand : candidates) {
    if (cand.outcome == Candidate::kCannotRun) {  // known before: not measured
      last_failure = cand.why;
    } else {
      try {
        measure(layers, config_of(cand), winner ? winner->score_us : -1, cand);
      } catch (const Error& e) {
        if (!agreed_failure(e)) throw;
        cand.outcome = Candidate::kCannotRun;
        cand.why = last_failure = e.what();
      }
    }
    if (cand.outcome == Candidate::kRan && (!winner || cand.score_us < winner->score_us))
      winner = &cand;
    if (talk)
      std::fprintf(stderr, "symcomm autotune: %s %s\n", label(cand).c_str(),
                   cand.outcome == Candidate::kRan ? format("%.1f us", cand.score_us).c_str()
                   : cand.outcome == Candidate::kSkipped
                       ? format("skipped (median %.1f us > autotune_skip %g x the best)",
                                cand.score_us, config.autotune_skip).c_str()
                       : ("cannot run: " + cand.why).c_str());
  }
  SYMCOMM_REQUIRE(winner, symcommNotSupported, "no %s autotuning candidate could run%s%s", what,
                  last_failure.empty() ? "" : "; the last failure: ", last_failure.c_str());
  if (talk) {
    std::fprintf(stderr, "symcomm autotune: %s table (score in us)\n", what);
    for (const Candidate& cand : candidates)
      std::fprintf(stderr, "symcomm autotune: %s %s%s\n", label(cand).c_str(),
                   cand.outcome == Candidate::kRan       ? format("%.1f", cand.score_us).c_str()
                   : cand.outcome == Candidate::kSkipped ? "skipped"
                                                         : ("cannot run: " + cand.why).c_str(),
                   &cand == winner ? "  <- chosen" : "");
  }
  return *winner;
}

// Splits a dimension unevenly (cuDecomp's test): rows split x and y, columns y and z.
bool uneven(const symcommDecompConfig_t& c, int pr, int pc) {
  return c.gdims[0] % pr || c.gdims[1] % pr || c.gdims[1] % pc || c.gdims[2] % pc;
}

}  // namespace

std::unique_ptr<Decomp> Decomp::autotune(const DecompLayers& layers,
                                         const symcommDecompConfig_t& config) {
  // Agreed, before any field is read: a configuration of another header version would be
  // read out of bounds below.
  layers.bootstrap.agree_on([&] { require_initialised(config); });
  // The same on every rank, so that every rank makes the same candidates.
  require_same_config(layers, config);
  const int n = layers.topology.nranks;
  const bool grid_open = config.pdims[0] == 0 && config.pdims[1] == 0;
  const std::string wanted = field(config.backend, sizeof config.backend);
  const bool backend_open = wanted == "auto";
  const bool halo_open = field(config.halo_backend, sizeof config.halo_backend) == "auto";
  const std::string env_grids = agreed_env(layers, kGrids);
  const std::string env_backends = agreed_env(layers, kBackends);
  Filter grids, backends, more_grids, more_backends;
  layers.bootstrap.agree_on([&] {
    validate(config, halo_open);
    if (!grid_open) (void)Geometry(config, n);  // a given grid: its checks and messages
    grids = parse_filter(field(config.autotune_grids, sizeof config.autotune_grids),
                         "autotune_grids", grid_name, "a grid PxQ");
    backends = parse_filter(field(config.autotune_backends, sizeof config.autotune_backends),
                            "autotune_backends", backend_name, "a registered backend");
    more_grids = parse_filter(env_grids, kGrids.name(), grid_name, "a grid PxQ");
    more_backends = parse_filter(env_backends, kBackends.name(), backend_name,
                                 "a registered backend");
  });
  // A candidate backend: one the filters allow; one meant for ranks out of load/store reach
  // only where some rank is out of reach, or where a filter names it.
  auto backend_allowed = [&](const DecompBackend& b) {
    const std::string name = b.name();
    return backends.allows(name) && more_backends.allows(name) &&
           (chosen_unasked(b, layers.heap) || backends.names(name) || more_backends.names(name));
  };
  const std::string filters =
      format("autotune_grids '%s', autotune_backends '%s', autotune_allow_uneven %d, %s '%s', "
             "%s '%s'", field(config.autotune_grids, sizeof config.autotune_grids).c_str(),
             field(config.autotune_backends, sizeof config.autotune_backends).c_str(),
             config.autotune_allow_uneven, kGrids.name(), env_grids.c_str(), kBackends.name(),
             env_backends.c_str());
  symcommDecompConfig_t chosen = config;
  chosen.halo_backend[0] = '\0';  // the transposes' candidates: halo exchanges do not count
  if (grid_open || backend_open) {
    std::vector<Candidate> candidates;
    for (int pr = 1; pr <= n; ++pr) {
      if (n % pr) continue;
      const int pc = n / pr;
      if (!grid_open && (pr != config.pdims[0] || pc != config.pdims[1])) continue;
      const std::string name = std::to_string(pr) + "x" + std::to_string(pc);
      if (grid_open && (!grids.allows(name) || !more_grids.allows(name) ||
                        (!config.autotune_allow_uneven && uneven(config, pr, pc))))
        continue;
      const size_t first = candidates.size();
      if (!backend_open) {
        candidates.push_back(Candidate{pr, pc, wanted});
      } else {
        for (DecompBackend* b : decomp_backends())
          if (backend_allowed(*b)) candidates.push_back(Candidate{pr, pc, b->name()});
      }
      // The halo phase comes on the grid chosen here: a grid on which its exchanges cannot
      // run is none (before, the grid phase could choose one, and the halo phase then failed
      // on every backend, naming only the last backend's reason).
      if (grid_open && halo_open)
        if (const std::string why = halo_misfit(config, pr, pc, n); !why.empty())
          for (size_t k = first; k < candidates.size(); ++k) {
            candidates[k].outcome = Candidate::kCannotRun;
            candidates[k].why = why;
          }
    }
    // Rows of consecutive ranks first: pc as large as possible (the grid 1 x n) first.
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.pc > b.pc; });
    SYMCOMM_REQUIRE(!candidates.empty(), symcommInvalidArgument,
                    "the autotuner has no grid and backend candidate (%s)", filters.c_str());
    const Candidate& best = tune(
        layers, config, candidates,
        [&](const Candidate& cand) {
          symcommDecompConfig_t c = chosen;
          c.pdims[0] = cand.pr;
          c.pdims[1] = cand.pc;
          std::snprintf(c.backend, sizeof c.backend, "%s", cand.backend.c_str());
          return c;
        },
        time_transposes,
        [](const Candidate& cand) {
          return format("grid %3dx%-4d backend %-14s", cand.pr, cand.pc,
                        cand.backend.empty() ? "\"\"" : cand.backend.c_str());
        },
        "grid and transpose backend");
    chosen.pdims[0] = best.pr;
    chosen.pdims[1] = best.pc;
    std::snprintf(chosen.backend, sizeof chosen.backend, "%s", best.backend.c_str());
  }
  std::memcpy(chosen.halo_backend, config.halo_backend, sizeof chosen.halo_backend);
  if (halo_open) {
    const std::string misfit = halo_misfit(config, chosen.pdims[0], chosen.pdims[1], n);
    SYMCOMM_REQUIRE(misfit.empty(), symcommInvalidArgument,
                    "halo_backend \"auto\": the autotuner's halo exchanges cannot run on the %d x "
                    "%d grid: %s", chosen.pdims[0], chosen.pdims[1], misfit.c_str());
    std::vector<Candidate> candidates;
    for (DecompBackend* b : decomp_backends())
      if (backend_allowed(*b))
        candidates.push_back(Candidate{chosen.pdims[0], chosen.pdims[1], b->name()});
    SYMCOMM_REQUIRE(!candidates.empty(), symcommInvalidArgument,
                    "the autotuner has no halo backend candidate (%s)", filters.c_str());
    const Candidate& best = tune(
        layers, config, candidates,
        [&](const Candidate& cand) {
          symcommDecompConfig_t c = chosen;
          std::snprintf(c.halo_backend, sizeof c.halo_backend, "%s", cand.backend.c_str());
          return c;
        },
        time_halos,
        [](const Candidate& cand) { return format("halo backend %-14s", cand.backend.c_str()); },
        "halo backend");
    std::snprintf(chosen.halo_backend, sizeof chosen.halo_backend, "%s", best.backend.c_str());
  }
  return create(layers, chosen);
}

}  // namespace symcomm
