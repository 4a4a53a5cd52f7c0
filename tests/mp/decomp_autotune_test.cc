// The decomposition autotuner through the C API (docs/decomp.md, "Autotuning"): the choice is
// valid, the same on every rank and works; the include/exclude filters of the configuration
// and of the environment; uneven grids on request only; the skip threshold after every timed
// round; candidates that cannot run say why; backends meant for ranks out of load/store
// reach only where some are; the weights; the report on rank 0 only; bad settings rejected
// with a clear error. Small grids and one or two rounds: quick everywhere.
// Halo backends and given grids are in decomp_autotune_halo_test.cc, a heap too small for
// some candidates in decomp_autotune_heap_test.cc (one binary).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decomp_autotune_fixture.h"

namespace decomp_autotune_test {

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
  if (runnable().size() < 2)
    GTEST_SKIP() << "needs two backends that run here (" << runnable().size() << " on "
                 << mp::nodes() << " nodes)";
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
// number claim two nodes (host space: node names are faked there only), where only the
// backends that need no load/store reach can run. Every other candidate fails with its
// backend's reason, and the autotuner picks one of those that can (through the transports).
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
  ASSERT_EQ(rc, symcommSuccess) << symcommGetLastError();
  const char* chosen = nullptr;
  SC_OK(symcommDecompGetBackend(d, &chosen));
  bool load_store = true;
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    if (std::strcmp(symcommDecompBackendName(i), chosen) == 0) load_store = info_of(i).load_store_peers;
  EXPECT_FALSE(load_store) << chosen << " needs load/store reach, and ranks are on two nodes";
  mp::expect_transposes_work(comm, d, c.gdims);
  SC_OK(symcommDecompDestroy(d));
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

// A backend meant for ranks out of load/store reach (for_unmapped_ranks) is a candidate of
// the autotuner, and backend "" takes it, only where some rank is out of reach (the world
// where symrun made nodes): where every rank is mapped the load/store backends are kept,
// unless a filter names it.
TEST(DecompAutotune, BackendsForUnmappedRanksOnlyWhereSomeAre) {
  const bool mapped = every_rank_mapped(mp::world());
  std::vector<std::string> meant;  // the backends meant for ranks out of reach
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    if (info_of(i).for_unmapped_ranks) meant.push_back(symcommDecompBackendName(i));
  if (meant.empty()) GTEST_SKIP() << "no backend is meant for ranks out of load/store reach";
  auto is_meant = [&](const std::string& name) {
    return std::find(meant.begin(), meant.end(), name) != meant.end();
  };
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  c.pdims[0] = 1;
  c.pdims[1] = mp::nranks();
  Created r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  const std::string chosen = agreed_choice(r.decomp).backend;
  const std::vector<Row> rows = table(r.out0, "grid and transpose backend");
  EXPECT_EQ(rows.size(), unasked_candidates(mp::world())) << r.out0;
  for (const Row& row : rows) {
    if (mapped) {
      EXPECT_FALSE(is_meant(row.backend)) << row.backend << " tried:\n" << r.out0;
    }
  }
  SC_OK(symcommDecompDestroy(r.decomp));
  // backend "": a load/store backend where every rank is mapped.
  std::snprintf(c.backend, sizeof c.backend, "%s", "");
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const char* automatic = nullptr;
  SC_OK(symcommDecompGetBackend(d, &automatic));
  if (mapped) {
    EXPECT_FALSE(is_meant(automatic)) << automatic;
  }
  SC_OK(symcommDecompDestroy(d));
  // Named by the filter, it is a candidate anywhere it runs.
  if (!runs_here(meant.front().c_str())) return;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  std::snprintf(c.autotune_backends, sizeof c.autotune_backends, "%s", meant.front().c_str());
  r = create_capturing(c);
  ASSERT_EQ(r.rc, symcommSuccess) << r.error;
  EXPECT_EQ(agreed_choice(r.decomp).backend, meant.front());
  expect_transposes_work(r.decomp, c.gdims);
  SC_OK(symcommDecompDestroy(r.decomp));
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

}  // namespace decomp_autotune_test
