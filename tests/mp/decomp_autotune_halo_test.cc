// The autotuner's halo backend, given or autotuned, and its grids: a given grid is checked as
// given, and a grid too fine for the autotuner's halo exchanges is no candidate.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "decomp_autotune_fixture.h"

namespace decomp_autotune_test {

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
  EXPECT_EQ(rows.size(), unasked_candidates(mp::world())) << r.out0;
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

}  // namespace decomp_autotune_test
