// The decomposition autotuner through the C API (docs/decomp.md, "Autotuning"): the choice is
// valid, the same on every rank and works; the include/exclude filters of the configuration
// and of the environment; uneven grids on request only; the skip threshold after every timed
// round; a halo backend of its own, given or autotuned; the report on rank 0 only; bad
// settings rejected with a clear error. Small grids and one or two rounds: quick everywhere.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mp.h"
#include "transpose_check.h"
#include "symcomm/decomp.h"

namespace {

symcommDecompConfig_t tiny_config(int64_t x, int64_t y, int64_t z) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = x;
  c.gdims[1] = y;
  c.gdims[2] = z;
  c.autotune_warmup = 0;
  c.autotune_trials = 1;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  return c;
}

// One row of the autotuner's final table as rank 0 printed it.
struct Row {
  int pr = 0, pc = 0;    // the grid table only
  std::string backend;
  std::string score;     // the score in us, "skipped" or "cannot run"
  std::string why;       // "cannot run": the reason printed after it
  bool chosen = false;
};

// Rank 0's `out`, on every rank (collective).
std::string rank0(const std::string& out) {
  uint64_t bytes = mp::rank() == 0 ? out.size() : 0;
  EXPECT_EQ(symcommHostBroadcast(mp::world(), &bytes, sizeof bytes, 0), symcommSuccess);
  std::string text = out;
  text.resize(bytes);
  if (bytes) {
    EXPECT_EQ(symcommHostBroadcast(mp::world(), text.data(), bytes, 0), symcommSuccess);
  }
  return text;
}

// What creating a decomposition from `c` (collective) printed on stderr, and its result.
struct Created {
  symcommResult_t rc;
  std::string error;  // symcommGetLastError() where rc failed
  std::string out;    // this rank's stderr
  std::string out0;   // rank 0's
  symcommDecomp_t decomp = nullptr;
};

Created create_capturing(const symcommDecompConfig_t& c) {
  Created r;
  ::testing::internal::CaptureStderr();
  r.rc = symcommDecompCreate(mp::world(), &c, &r.decomp);
  r.out = ::testing::internal::GetCapturedStderr();
  if (r.rc != symcommSuccess) r.error = symcommGetLastError();
  r.out0 = rank0(r.out);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> all;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    all.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return all;
}

// The rows of the table headed "<what> table" in `out` ("grid and transpose backend" or
// "halo backend"), in the order the candidates ran.
std::vector<Row> table(const std::string& out, const std::string& what) {
  std::vector<Row> rows;
  bool in = false;
  const std::string head = "symcomm autotune: " + what + " table";
  for (const std::string& l : lines(out)) {
    if (l.rfind(head, 0) == 0) {
      in = true;
      continue;
    }
    if (!in || l.rfind("symcomm autotune: ", 0) != 0) continue;
    Row r;
    char backend[64] = {}, score[64] = {};
    if (what == "halo backend") {
      if (std::sscanf(l.c_str(), "symcomm autotune: halo backend %63s %63[a-z0-9. ]", backend,
                      score) != 2)
        break;  // the end of the table
    } else if (std::sscanf(l.c_str(), "symcomm autotune: grid %dx%d backend %63s %63[a-z0-9. ]",
                           &r.pr, &r.pc, backend, score) != 4) {
      break;
    }
    r.backend = backend;
    r.score = score;
    while (!r.score.empty() && r.score.back() == ' ') r.score.pop_back();
    r.chosen = l.find("<- chosen") != std::string::npos;
    if (const size_t at = l.find("cannot run: "); at != std::string::npos) r.why = l.substr(at + 12);
    rows.push_back(r);
  }
  return rows;
}

bool ran(const Row& r) { return r.score != "skipped" && r.score != "cannot run"; }

// Whether `backend` can run on the world communicator on a 1 x n grid (collective).
bool runs_here(const char* backend) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  c.pdims[0] = 1;
  c.pdims[1] = mp::nranks();
  std::snprintf(c.backend, sizeof c.backend, "%s", backend);
  symcommDecomp_t d = nullptr;
  if (symcommDecompCreate(mp::world(), &c, &d) != symcommSuccess) return false;
  EXPECT_EQ(symcommDecompDestroy(d), symcommSuccess);
  return true;
}

// The backends that run on the world communicator, in the registry's order (collective,
// asked once): what the filters and configurations below name.
const std::vector<std::string>& runnable() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (int i = 0; i < symcommDecompBackendCount(); ++i)
      if (runs_here(symcommDecompBackendName(i))) all.push_back(symcommDecompBackendName(i));
    return all;
  }();
  return names;
}

// The backend the tests below name where any one that runs will do (the last that runs here),
// and another one (the first), "" where there is none. Collective.
std::string one() {
  EXPECT_FALSE(runnable().empty()) << "no backend runs here";
  return runnable().empty() ? "" : runnable().back();
}
std::string another() {
  EXPECT_GE(runnable().size(), 2u) << "fewer than two backends run here";
  return runnable().size() < 2 ? "" : runnable().front();
}

double value(const int64_t* g, int64_t x, int64_t y, int64_t z) {
  return mp::global_index(g, x, y, z);
}

void expect_transposes_work(symcommDecomp_t d, const int64_t* g) {
  mp::expect_transposes_work(mp::world(), d, g);
}

// A periodic halo exchange of the X pencil along y (split over the rows) with a halo of one:
// both y halos hold the wrapped-around neighbours' points afterwards.
void expect_y_halo_works(symcommDecomp_t d, const int64_t* g) {
  const int64_t halo[3] = {0, 1, 0};
  const int periodic[3] = {1, 1, 1};
  symcommPencilInfo_t p;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &p));
  size_t ws_bytes = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &ws_bytes));
  std::vector<size_t> sizes(static_cast<size_t>(mp::nranks()));
  SC_OK(symcommHostAllgather(mp::world(), &ws_bytes, sizes.data(), sizeof ws_bytes));
  void* ws = nullptr;
  SC_OK(symcommMalloc(mp::world(), std::max<size_t>(8, *std::max_element(sizes.begin(), sizes.end())), &ws));
  std::vector<double> host(static_cast<size_t>(p.size), -1.0);
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t y = p.lo[1]; y < p.hi[1]; ++y)
      for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
        host[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] = value(g, x, y, z);
  void* buf = mp::local_alloc(host.size() * 8);
  mp::copy_from_host(buf, host.data(), host.size() * 8);
  symcommStream_t stream = mp::new_stream();
  SC_OK(symcommDecompHalo(d, 0, 1, buf, ws, symcommR64, halo, nullptr, periodic, stream));
  mp::sync(stream);
  mp::copy_to_host(host.data(), buf, host.size() * 8);
  int64_t bad = 0;
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
      for (int64_t y : {p.lo[1] - 1, p.hi[1]})
        bad += host[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] !=
               value(g, x, (y + g[1]) % g[1], z);
  EXPECT_EQ(bad, 0) << "y halo points wrong";
  mp::free_stream(stream);
  mp::local_free(buf);
  SC_OK(symcommFree(mp::world(), ws));
}

// Creating a decomposition from `c` fails with `code` and an error that says `says`.
void expect_rejected(const symcommDecompConfig_t& c, symcommResult_t code, const char* says) {
  symcommDecomp_t d = nullptr;
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), code);
  EXPECT_NE(std::strstr(symcommGetLastError(), says), nullptr) << symcommGetLastError();
  EXPECT_EQ(d, nullptr);
}

// The configuration in force, checked to be the same on every rank.
symcommDecompConfig_t agreed_choice(symcommDecomp_t d) {
  symcommDecompConfig_t chosen;
  EXPECT_EQ(symcommDecompGetConfig(d, &chosen), symcommSuccess);
  std::vector<symcommDecompConfig_t> all(static_cast<size_t>(mp::nranks()));
  EXPECT_EQ(symcommHostAllgather(mp::world(), &chosen, all.data(), sizeof chosen), symcommSuccess);
  for (const symcommDecompConfig_t& other : all)
    EXPECT_EQ(std::memcmp(&other, &chosen, sizeof chosen), 0) << "ranks chose differently";
  return chosen;
}

TEST(DecompAutotune, PicksAValidGrid) {
  symcommDecompConfig_t c = tiny_config(12, 10, 8);
  c.autotune_trials = 2;
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));  // pdims 0 x 0: autotune
  const symcommDecompConfig_t chosen = agreed_choice(d);
  EXPECT_EQ(chosen.pdims[0] * chosen.pdims[1], mp::nranks());
  // The fastest backend wins, whichever it is here: one of the registered.
  bool registered = false;
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    registered |= std::strcmp(symcommDecompBackendName(i), chosen.backend) == 0;
  EXPECT_TRUE(registered) << chosen.backend;
  // The halo backend "" is the transpose backend.
  EXPECT_STREQ(chosen.halo_backend, chosen.backend);
  expect_transposes_work(d, c.gdims);
  SC_OK(symcommDecompDestroy(d));
  // The environment's filter, set on every rank: the one grid allowed is chosen; none allowed
  // is an error.
  const std::string only = "1x" + std::to_string(mp::nranks());
  {
    mp::ScopedEnv grids("SYMCOMM_DECOMP_AUTOTUNE_GRIDS", only);
    SC_OK(symcommDecompCreate(mp::world(), &c, &d));
    EXPECT_EQ(agreed_choice(d).pdims[0], 1);
    SC_OK(symcommDecompDestroy(d));
  }
  {
    mp::ScopedEnv grids("SYMCOMM_DECOMP_AUTOTUNE_GRIDS", "3x7");
    expect_rejected(c, symcommInvalidArgument, "no grid and backend candidate");
  }
}

// The environment's filters are per process: ranks that disagree are told, not left to time
// different candidates and wait for each other.
TEST(DecompAutotune, EnvironmentFiltersMustAgree) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  const std::string b = one();
  mp::ScopedEnv backends("SYMCOMM_DECOMP_AUTOTUNE_BACKENDS", mp::rank() == 0 ? b : "");
  expect_rejected(c, symcommInvalidUsage, "SYMCOMM_DECOMP_AUTOTUNE_BACKENDS");
}

TEST(DecompAutotune, BackendFilterIncludesAndExcludes) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  const std::string b = one(), other = another();
  const char* name = b.c_str();
  // Include: only b is tried, and chosen.
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, " %s ", name);
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_STREQ(agreed_choice(r.decomp).backend, name);
  std::vector<Row> rows = table(r.out0, "grid and transpose backend");
  EXPECT_FALSE(rows.empty()) << r.out0;
  for (const Row& row : rows) EXPECT_EQ(row.backend, b);
  SC_OK(symcommDecompDestroy(r.decomp));
  // Exclude: b is never tried; the others are.
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "!%s", name);
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_STRNE(agreed_choice(r.decomp).backend, name);
  rows = table(r.out0, "grid and transpose backend");
  EXPECT_FALSE(rows.empty()) << r.out0;
  for (const Row& row : rows) EXPECT_NE(row.backend, b);
  SC_OK(symcommDecompDestroy(r.decomp));
  // The environment filters further: config "b,other" and environment "!other" leave b.
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s,%s", name, other.c_str());
  {
    mp::ScopedEnv env("SYMCOMM_DECOMP_AUTOTUNE_BACKENDS", "!" + other);
    r = create_capturing(c);
    ASSERT_EQ(r.rc, symcommSuccess) << r.error;
    EXPECT_STREQ(agreed_choice(r.decomp).backend, name);
    SC_OK(symcommDecompDestroy(r.decomp));
  }
  // A name that is not registered is an error, not an empty list.
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s,!bogus", name);
  expect_rejected(c, symcommInvalidArgument, "'!bogus' is not a registered backend");
  // Everything excluded: no candidate.
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s,!%s", name, name);
  expect_rejected(c, symcommInvalidArgument, "no grid and backend candidate");
}

TEST(DecompAutotune, GridFilterIncludesAndExcludes) {
  const int n = mp::nranks();
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s", one().c_str());
  std::snprintf(c.autotune_grids, sizeof c.autotune_grids, "%dx1", n);
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_EQ(agreed_choice(r.decomp).pdims[0], n);
  SC_OK(symcommDecompDestroy(r.decomp));
  std::snprintf(c.autotune_grids, sizeof c.autotune_grids, "!1x%d", n);
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_NE(agreed_choice(r.decomp).pdims[0], 1);
  const std::vector<Row> rows = table(r.out0, "grid and transpose backend");
  ASSERT_FALSE(rows.empty()) << r.out0;  // the loop below checks something
  for (const Row& row : rows) EXPECT_NE(row.pr, 1);
  SC_OK(symcommDecompDestroy(r.decomp));
  std::snprintf(c.autotune_grids, sizeof c.autotune_grids, "2by4");
  expect_rejected(c, symcommInvalidArgument, "'2by4' is not a grid PxQ");
}

// {n, n, 3} points: every grid but n x 1 splits z (3 points) over several columns unevenly.
TEST(DecompAutotune, UnevenGridsOnlyWhenAllowed) {
  const int n = mp::nranks();
  symcommDecompConfig_t c = tiny_config(n, n, 3);
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s", one().c_str());
  ASSERT_EQ(c.autotune_allow_uneven, 1) << "the default allows uneven grids, as cuDecomp";
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  std::vector<Row> rows = table(r.out0, "grid and transpose backend");
  EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [](const Row& row) { return row.pr == 1; }))
      << "the uneven grid 1 x n is a candidate by default:\n" << r.out0;
  SC_OK(symcommDecompDestroy(r.decomp));
  c.autotune_allow_uneven = 0;
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  const symcommDecompConfig_t chosen = agreed_choice(r.decomp);
  EXPECT_EQ(chosen.pdims[0], n);
  EXPECT_EQ(chosen.pdims[1], 1);
  rows = table(r.out0, "grid and transpose backend");
  ASSERT_EQ(rows.size(), 1u) << r.out0;
  EXPECT_EQ(rows[0].pr, n);
  SC_OK(symcommDecompDestroy(r.decomp));
  // No even grid at all: a clear error.
  c.gdims[0] = c.gdims[1] = c.gdims[2] = 2 * n + 1;
  expect_rejected(c, symcommInvalidArgument, "autotune_allow_uneven 0");
  c.autotune_allow_uneven = 2;
  expect_rejected(c, symcommInvalidArgument, "autotune_allow_uneven is 2");
}

// The skip threshold acts after every timed round, warm-up or not: with autotune_skip 1, a
// candidate that completes its rounds is never slower than the best before it, so the scores
// of the candidates that ran, in the order they ran, never increase, and the last is chosen.
// (Applied during warm-up only, as before, autotune_warmup 0 disabled it: every candidate
// ran to the end.) With a huge threshold nothing is skipped.
TEST(DecompAutotune, SkipThresholdAfterEveryTimedRound) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  c.autotune_trials = 2;
  c.autotune_skip = 1.0;
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  std::vector<Row> rows = table(r.out0, "grid and transpose backend");
  ASSERT_FALSE(rows.empty()) << r.out0;
  std::vector<const Row*> completed;
  for (const Row& row : rows)
    if (ran(row)) completed.push_back(&row);
  ASSERT_FALSE(completed.empty());
  // The first candidate that can run has no best before it: it is never skipped (the scores
  // compared below begin with it).
  const auto runnable = [](const Row& row) { return row.score != "cannot run"; };
  const auto first = std::find_if(rows.begin(), rows.end(), runnable);
  ASSERT_NE(first, rows.end());
  EXPECT_EQ(completed.front(), &*first) << r.out0;
  for (size_t i = 1; i < completed.size(); ++i)
    EXPECT_LE(std::stod(completed[i]->score), std::stod(completed[i - 1]->score))
        << "a candidate slower than the best before it was not skipped:\n" << r.out0;
  // The winner is the first to reach the lowest score: the last one's score.
  for (const Row& row : rows) {
    if (!row.chosen) continue;
    EXPECT_EQ(row.score, completed.back()->score) << r.out0;
  }
  SC_OK(symcommDecompDestroy(r.decomp));
  c.autotune_skip = 1e300;
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  // The same candidates in the same order, and every one that can run (ran or was skipped
  // above) ran to the end: none is skipped, and none that could run is missing.
  const std::vector<Row> all = table(r.out0, "grid and transpose backend");
  ASSERT_EQ(all.size(), rows.size()) << r.out0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Row& row = all[i];
    SCOPED_TRACE(std::to_string(row.pr) + "x" + std::to_string(row.pc) + " " + row.backend);
    EXPECT_EQ(row.pr, rows[i].pr);
    EXPECT_EQ(row.pc, rows[i].pc);
    EXPECT_EQ(row.backend, rows[i].backend);
    EXPECT_NE(row.score, "skipped");
    EXPECT_EQ(ran(row), runnable(rows[i])) << row.score << " (before: " << rows[i].score << ")";
    if (!ran(row)) {
      EXPECT_GT(row.why.size(), 10u) << "a candidate that cannot run says why:\n" << r.out0;
    }
  }
  SC_OK(symcommDecompDestroy(r.decomp));
}

// A candidate that cannot run says why, in its line and in the table: ranks of even and odd
// number claim two nodes (host space: node names are faked there only), where no backend
// reaches every rank, so that every candidate fails with its backend's reason.
TEST(DecompAutotune, EveryCandidateThatCannotRunSaysWhy) {
  if (mp::space() == symcommSpaceCuda) GTEST_SKIP() << "node names are faked in the host space only";
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two nodes";
  symcommComm_t comm = mp::new_two_node_comm();
  ASSERT_NE(comm, nullptr);
  const symcommDecompConfig_t c = tiny_config(8, 8, 8);
  symcommDecomp_t d = nullptr;
  ::testing::internal::CaptureStderr();
  const symcommResult_t rc = symcommDecompCreate(comm, &c, &d);
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "could run"), nullptr) << symcommGetLastError();
  if (mp::rank() == 0) {
    size_t lines_seen = 0;
    for (const std::string& l : lines(out)) {
      const size_t at = l.find("cannot run");
      if (at == std::string::npos) continue;
      ++lines_seen;
      EXPECT_NE(l.find("cannot run: "), std::string::npos) << l;
      EXPECT_TRUE(l.find("is on node") != std::string::npos ||
                  l.find("cuda memory space") != std::string::npos) << l;
    }
    EXPECT_GT(lines_seen, 0u) << out;
  }
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// Only X->Y counts; the others are not run.
TEST(DecompAutotune, WeightsOfOneTranspose) {
  symcommDecompConfig_t c = tiny_config(8, 6, 4);
  const double weights[4] = {1, 0, 0, 0};
  std::copy(weights, weights + 4, c.autotune_weights);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const symcommDecompConfig_t chosen = agreed_choice(d);
  EXPECT_EQ(chosen.pdims[0] * chosen.pdims[1], mp::nranks());
  expect_transposes_work(d, c.gdims);
  SC_OK(symcommDecompDestroy(d));
}

TEST(DecompAutotune, BadSettingsAreRejected) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  c.autotune_type = static_cast<symcommDecompType_t>(7);
  expect_rejected(c, symcommInvalidArgument, "autotune_type 7 is not a symcommDecompType_t");
  c = tiny_config(8, 8, 8);
  for (double& w : c.autotune_weights) w = 0;
  expect_rejected(c, symcommInvalidArgument, "autotune_weights are all 0");
  c.autotune_weights[2] = -1;
  expect_rejected(c, symcommInvalidArgument, "autotune_weights[2] is -1");
  // Halo settings are checked where halos are autotuned.
  c = tiny_config(8, 8, 8);
  std::snprintf(c.halo_backend, sizeof c.halo_backend, "auto");
  c.autotune_halo_axis = 3;
  expect_rejected(c, symcommInvalidArgument, "autotune_halo_axis is 3");
  c.autotune_halo_axis = 0;
  for (int64_t& e : c.autotune_halo_extents) e = 0;
  expect_rejected(c, symcommInvalidArgument, "autotune_halo_extents are all 0");
}

// Rank 0 prints a line per candidate and the final table; the other ranks print nothing.
TEST(DecompAutotune, ReportOnRankZeroOnly) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s", one().c_str());
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  const symcommDecompConfig_t chosen = agreed_choice(r.decomp);
  SC_OK(symcommDecompDestroy(r.decomp));
  if (mp::rank() != 0) {
    EXPECT_EQ(r.out.find("symcomm autotune"), std::string::npos) << r.out;
    return;
  }
  const std::string progress = "symcomm autotune: grid " +
                               std::string(chosen.pdims[0] < 10 ? "  " : " ") +
                               std::to_string(chosen.pdims[0]) + "x" + std::to_string(chosen.pdims[1]);
  EXPECT_NE(r.out.find(progress), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" us\n"), std::string::npos) << "no progress line with a score:\n" << r.out;
  const std::vector<Row> rows = table(r.out, "grid and transpose backend");
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [](const Row& row) { return row.chosen; }), 1)
      << r.out;
  for (const Row& row : rows) {
    if (!row.chosen) continue;
    EXPECT_EQ(row.pr, chosen.pdims[0]);
    EXPECT_EQ(row.pc, chosen.pdims[1]);
  }
}

// A halo backend of its own: transposes on one backend, halo exchanges on another whose
// halo workspace (each measured alone) differs, and both work.
TEST(DecompAutotune, HaloBackendGiven) {
  const int n = mp::nranks();
  symcommDecompConfig_t c = tiny_config(n, 2 * n, 3);
  c.pdims[0] = n;
  c.pdims[1] = 1;
  const int64_t halo[3] = {0, 1, 0};
  // Each backend that runs here with its halo workspace, alone.
  std::vector<std::pair<std::string, size_t>> alone;
  for (int i = 0; i < symcommDecompBackendCount(); ++i) {
    std::snprintf(c.backend, sizeof c.backend, "%s", symcommDecompBackendName(i));
    symcommDecomp_t d = nullptr;
    const symcommResult_t rc = symcommDecompCreate(mp::world(), &c, &d);
    if (rc != symcommSuccess) {
      EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
      continue;
    }
    size_t bytes = 0;
    SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &bytes));
    SC_OK(symcommDecompDestroy(d));
    alone.push_back({symcommDecompBackendName(i), bytes});
  }
  const auto differs = std::find_if(alone.begin(), alone.end(), [&](const auto& b) {
    return b.second != alone.front().second;
  });
  if (differs == alone.end()) GTEST_SKIP() << "needs two backends with different halo workspaces";
  const std::string& transposes = alone.front().first;
  const std::string& halos = differs->first;
  std::snprintf(c.backend, sizeof c.backend, "%s", transposes.c_str());
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));  // halo_backend "": the same
  const char* name = nullptr;
  SC_OK(symcommDecompGetHaloBackend(d, &name));
  EXPECT_EQ(name, transposes);
  SC_OK(symcommDecompDestroy(d));
  std::snprintf(c.halo_backend, sizeof c.halo_backend, "%s", halos.c_str());
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  SC_OK(symcommDecompGetBackend(d, &name));
  EXPECT_EQ(name, transposes);
  SC_OK(symcommDecompGetHaloBackend(d, &name));
  EXPECT_EQ(name, halos);
  symcommDecompConfig_t in_force;
  SC_OK(symcommDecompGetConfig(d, &in_force));
  EXPECT_EQ(in_force.backend, transposes);
  EXPECT_EQ(in_force.halo_backend, halos);
  size_t own = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &own));
  EXPECT_EQ(own, differs->second) << "the halo workspace is not " << halos << "'s";
  expect_transposes_work(d, c.gdims);
  expect_y_halo_works(d, c.gdims);
  SC_OK(symcommDecompDestroy(d));
  std::snprintf(c.halo_backend, sizeof c.halo_backend, "bogus");
  expect_rejected(c, symcommInvalidArgument, "no decomposition backend named bogus can run");
}

// halo_backend "auto": every allowed backend is timed on halo exchanges on the grid given;
// rank 0 prints the halo table; the choice works.
TEST(DecompAutotune, HaloBackendAutotuned) {
  const int n = mp::nranks();
  symcommDecompConfig_t c = tiny_config(n, 2 * n, 3);
  c.pdims[0] = n;
  c.pdims[1] = 1;
  const std::string b = one();
  std::snprintf(c.backend, sizeof c.backend, "%s", b.c_str());
  std::snprintf(c.halo_backend, sizeof c.halo_backend, "auto");
  c.autotune_trials = 2;
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  const symcommDecompConfig_t chosen = agreed_choice(r.decomp);
  EXPECT_EQ(chosen.backend, b);
  EXPECT_EQ(chosen.pdims[0], n);
  const std::vector<Row> rows = table(r.out0, "halo backend");
  EXPECT_EQ(rows.size(), static_cast<size_t>(symcommDecompBackendCount())) << r.out0;
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [&](const Row& row) {
              return row.chosen && row.backend == chosen.halo_backend;
            }), 1) << r.out0;
  // The grid and transpose backend were given: no grid table.
  EXPECT_TRUE(table(r.out0, "grid and transpose backend").empty()) << r.out0;
  expect_y_halo_works(r.decomp, c.gdims);
  SC_OK(symcommDecompDestroy(r.decomp));
  // The backend filter applies to the halo candidates too.
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s", b.c_str());
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_EQ(agreed_choice(r.decomp).halo_backend, b);
  EXPECT_EQ(table(r.out0, "halo backend").size(), 1u) << r.out0;
  SC_OK(symcommDecompDestroy(r.decomp));
  // Everything autotuned at once: grid and transpose backend, then the halo backend.
  c.pdims[0] = c.pdims[1] = 0;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  c.autotune_backends[0] = '\0';
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_FALSE(table(r.out0, "grid and transpose backend").empty()) << r.out0;
  EXPECT_FALSE(table(r.out0, "halo backend").empty()) << r.out0;
  agreed_choice(r.decomp);
  SC_OK(symcommDecompDestroy(r.decomp));
}

// A grid given with backend "auto" is checked as a decomposition checks it (the error used
// to blame the autotuner's filters: "no grid and backend candidate").
TEST(DecompAutotune, AGivenGridIsCheckedAsGiven) {
  const int n = mp::nranks();
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  c.pdims[0] = 0;
  c.pdims[1] = n;
  expect_rejected(c, symcommInvalidArgument, "pdims is 0 x");
  c.pdims[0] = n + 1;
  c.pdims[1] = n + 1;
  expect_rejected(c, symcommInvalidArgument, "does not match the communicator's");
}

// With halo_backend "auto" and an open grid, a grid on which the autotuner's halo exchanges
// cannot run (a halo wider than a part) is no candidate: a 64 x (n + 1) x 64 grid on n x 1
// splits y (the X pencils') into parts of 1-2 points, narrower than a halo of 2; before, the
// grid phase could choose it and the halo phase then failed on every backend.
TEST(DecompAutotune, AGridTooFineForTheHalosIsNoCandidate) {
  const int n = mp::nranks();
  if (n < 2) GTEST_SKIP() << "needs a grid that splits y";
  symcommDecompConfig_t c = tiny_config(64, n + 1, 64);
  std::snprintf(c.halo_backend, sizeof c.halo_backend, "auto");
  for (int a = 0; a < 3; ++a) c.autotune_halo_extents[a] = 2;
  std::snprintf(c.autotune_grids, sizeof c.autotune_grids, "%dx1,1x%d", n, n);
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const symcommDecompConfig_t chosen = agreed_choice(d);
  EXPECT_EQ(chosen.pdims[0], 1) << "the halos do not fit y split over " << n << " rows";
  SC_OK(symcommDecompDestroy(d));
  // Only the grid that cannot run them: the error says why.
  std::snprintf(c.autotune_grids, sizeof c.autotune_grids, "%dx1", n);
  expect_rejected(c, symcommNotSupported, "halo 2 along axis 1 is larger than part");
  // A given grid too fine for them: said before any halo backend is timed.
  std::snprintf(c.autotune_grids, sizeof c.autotune_grids, "%s", "");
  c.pdims[0] = n;
  c.pdims[1] = 1;
  std::snprintf(c.backend, sizeof c.backend, "%s", one().c_str());
  expect_rejected(c, symcommInvalidArgument, "the autotuner's halo exchanges cannot run on the");
}

// The largest symmetric allocation `comm` can make now (collective), to 4 KiB.
size_t largest_allocation(symcommComm_t comm, size_t most) {
  size_t lo = 0, hi = most;
  while (hi - lo > 4096) {
    const size_t mid = (lo + hi) / 2 / 4096 * 4096;
    void* p = nullptr;
    if (symcommMalloc(comm, mid, &p) == symcommSuccess) {
      EXPECT_EQ(symcommFree(comm, p), symcommSuccess) << symcommGetLastError();
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// A candidate whose buffers do not fit in the heap cannot run; the others still can, and no
// candidate keeps its buffers. Two backends whose transposes need different room (two
// pencils and the workspace: sm three pencils, fused four) are the candidates, and the heap
// is filled to leave room between the two needs. Before, the first failure to fit ended the
// autotuning, and the buffers allocated before it stayed.
TEST(DecompAutotune, ACandidateThatDoesNotFitInTheHeapCannotRun) {
  const int n = mp::nranks();
  mp::ScopedEnv heap_max("SYMCOMM_HEAP_MAX", "32M");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommDecompConfig_t c = tiny_config(32, 32, 32);
  c.pdims[0] = 1;
  c.pdims[1] = n;
  const size_t pencil = 32 * 32 * 32 * 8 / static_cast<size_t>(n);  // C32
  // Each backend that runs here with what its transposes need.
  std::vector<std::pair<std::string, size_t>> needs;
  for (int i = 0; i < symcommDecompBackendCount(); ++i) {
    std::snprintf(c.backend, sizeof c.backend, "%s", symcommDecompBackendName(i));
    symcommDecomp_t d = nullptr;
    const symcommResult_t rc = symcommDecompCreate(comm, &c, &d);
    if (rc != symcommSuccess) {
      EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
      continue;
    }
    size_t workspace = 0;
    SC_OK(symcommDecompWorkspaceSize(d, symcommC32, &workspace));
    SC_OK(symcommDecompDestroy(d));
    needs.push_back({symcommDecompBackendName(i), 2 * pencil + workspace});
  }
  std::stable_sort(needs.begin(), needs.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  // The one that needs least, and one that needs a pencil more: room for 1/2 pencil more
  // than the first needs.
  const auto larger = std::find_if(needs.begin(), needs.end(), [&](const auto& b) {
    return b.second >= needs.front().second + pencil;
  });
  if (larger == needs.end()) GTEST_SKIP() << "needs two backends a pencil apart in workspace";
  const auto& [fits, fits_need] = needs.front();
  const auto& [too_large, too_large_need] = *larger;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s,%s", fits.c_str(),
                too_large.c_str());
  const size_t free_at_first = largest_allocation(comm, size_t{32} << 20);
  ASSERT_GT(free_at_first, too_large_need);
  void* filler = nullptr;
  SC_OK(symcommMalloc(comm, free_at_first - (fits_need + pencil / 2), &filler));
  const size_t before = largest_allocation(comm, 2 * too_large_need);
  ASSERT_GE(before, fits_need);
  ASSERT_LT(before, too_large_need);
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(comm, &c, &d));
  const char* backend = nullptr;
  SC_OK(symcommDecompGetBackend(d, &backend));
  EXPECT_EQ(backend, fits);
  SC_OK(symcommDecompDestroy(d));
  EXPECT_EQ(largest_allocation(comm, 2 * too_large_need), before) << "a candidate kept heap memory";
  SC_OK(symcommFree(comm, filler));
  SC_OK(symcommFinalize(comm));
}

}  // namespace
