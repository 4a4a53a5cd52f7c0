// Teams of one-sided communication (host API): splits, rows with a short one, nested splits,
// and a split that does not wait for other work on the GPU.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, Teams) {
  const int n = mp::nranks(), me = mp::rank();
  int r = -1, size = -1, node = -1, nnodes = -1;
  SC_OK(symcommTeamRank(comm_, SYMCOMM_TEAM_NODE, &r));
  SC_OK(symcommTeamSize(comm_, SYMCOMM_TEAM_NODE, &size));
  SC_OK(symcommCommNode(comm_, &node, &nnodes));
  // Nodes of consecutive ranks, as symrun --nodes makes them (one node without it).
  EXPECT_EQ(size, n / nnodes);
  EXPECT_EQ(r, me % (n / nnodes));
  EXPECT_EQ(node, me / (n / nnodes));
  // Even ranks.
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n + 1) / 2, &even));
  if (me % 2 == 0) {
    ASSERT_NE(even, SYMCOMM_TEAM_INVALID);
    SC_OK(symcommTeamRank(comm_, even, &r));
    EXPECT_EQ(r, me / 2);
    int world = -1;
    SC_OK(symcommTeamTranslate(comm_, even, r, SYMCOMM_TEAM_WORLD, &world));
    EXPECT_EQ(world, me);
    for (int k = 0; k < 50; ++k) SC_OK(symcommBarrierOnStream(comm_, even, stream_));
  } else {
    EXPECT_EQ(even, SYMCOMM_TEAM_INVALID);
    SC_OK(symcommTeamRank(comm_, even, &r));
    EXPECT_EQ(r, -1);
    SC_FAILS(symcommBarrierOnStream(comm_, even, stream_), symcommInvalidArgument);
  }
  mp::sync(stream_);
  // Rows of two and columns.
  symcommTeam_t row, col;
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, 2, &row, &col));
  SC_OK(symcommTeamRank(comm_, row, &r));
  EXPECT_EQ(r, me % 2);
  SC_OK(symcommTeamSize(comm_, col, &size));
  EXPECT_EQ(size, (n - me % 2 + 1) / 2);
  SC_OK(symcommTeamRank(comm_, col, &r));
  EXPECT_EQ(r, me / 2);
  int in_world = -1, in_row = -2;
  SC_OK(symcommTeamTranslate(comm_, col, 0, SYMCOMM_TEAM_WORLD, &in_world));
  EXPECT_EQ(in_world, me % 2);
  SC_OK(symcommTeamTranslate(comm_, col, 0, row, &in_row));
  EXPECT_EQ(in_row, me < 2 ? me % 2 : -1);
  for (int k = 0; k < 20; ++k) {
    SC_OK(symcommBarrierOnStream(comm_, row, stream_));
    SC_OK(symcommBarrierOnStream(comm_, col, stream_));
  }
  mp::sync(stream_);
  // Members that disagree fail everywhere; bad shapes are refused.
  symcommTeam_t t;
  SC_FAILS(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, me == 0 ? 1 : 2, &t),
           symcommInvalidUsage);
  SC_FAILS(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 0, 1, &t),
           symcommInvalidArgument);
  SC_FAILS(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 1, 1, n, &t),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "goes past"), nullptr) << symcommGetLastError();
  // A parent that is a team on no rank (it was a success that made no team).
  SC_FAILS(symcommTeamSplitStrided(comm_, 40, 0, 1, 1, &t), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "parent team 40 is a team on no rank"), nullptr)
      << symcommGetLastError();
  // Teams of one with huge strides, split again (stride x step overflowed into a stride of
  // 0, and index_of divided by zero), and 2D splits with an xrange near INT_MAX.
  symcommTeam_t one, one_again, row_team, col_team;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, n, 1, &one));
  const bool in_one = me == 0;
  EXPECT_EQ(one != SYMCOMM_TEAM_INVALID, in_one);
  SC_OK(symcommTeamSplitStrided(comm_, in_one ? one : SYMCOMM_TEAM_INVALID, 0, 1 << 30, 1,
                                &one_again));
  EXPECT_EQ(one_again != SYMCOMM_TEAM_INVALID, in_one);
  SC_OK(symcommTeamSplit2D(comm_, in_one ? one : SYMCOMM_TEAM_INVALID, 1 << 30, &row_team,
                           &col_team));
  if (in_one) {
    for (symcommTeam_t id : {one_again, row_team, col_team}) {
      int size = 0, rank = -1;
      SC_OK(symcommTeamSize(comm_, id, &size));
      SC_OK(symcommTeamRank(comm_, id, &rank));
      EXPECT_EQ(size, 1);
      EXPECT_EQ(rank, 0);
    }
    SC_OK(symcommBarrierOnStream(comm_, one_again, stream_));
    mp::sync(stream_);
  }
  symcommTeam_t rows, cols;  // the world in one row of n (xrange past its size), columns of one
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, INT_MAX, &rows, &cols));
  int rows_size = 0, cols_size = 0;
  SC_OK(symcommTeamSize(comm_, rows, &rows_size));
  SC_OK(symcommTeamSize(comm_, cols, &cols_size));
  EXPECT_EQ(rows_size, n);
  EXPECT_EQ(cols_size, 1);
  for (symcommTeam_t id : {rows, cols}) SC_OK(symcommTeamDestroy(comm_, id));
  for (symcommTeam_t id : {one_again, row_team, col_team, one})
    if (id != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, id));
  SC_FAILS(symcommTeamDestroy(comm_, SYMCOMM_TEAM_WORLD), symcommInvalidArgument);
  SC_OK(symcommTeamDestroy(comm_, row));
  SC_OK(symcommTeamDestroy(comm_, col));
  if (even != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, even));
  SC_FAILS(symcommTeamRank(comm_, row, &r), symcommInvalidArgument);
  // Ids are reused, and a new team starts with a clean barrier.
  symcommTeam_t again;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, n, &again));
  for (int k = 0; k < 10; ++k) SC_OK(symcommBarrierOnStream(comm_, again, stream_));
  mp::sync(stream_);
  SC_OK(symcommTeamDestroy(comm_, again));
}

// Rows of three (the last row short unless 3 divides the ranks: 2 ranks make one row of 2,
// 4 a row of 3 and one of 1, 8 rows of 3, 3 and 2), then splits of a team that is not the
// world: its members 1.. and its rows of two.
TEST_F(Rma, TeamsWithAShortRowAndNestedSplits) {
  const int n = mp::nranks(), me = mp::rank();
  auto expect_team = [&](symcommTeam_t t, int rank, int size, int world0, const char* what) {
    int r = -2, z = -2, w = -2;
    SC_OK(symcommTeamRank(comm_, t, &r));
    SC_OK(symcommTeamSize(comm_, t, &z));
    SC_OK(symcommTeamTranslate(comm_, t, 0, SYMCOMM_TEAM_WORLD, &w));
    EXPECT_EQ(r, rank) << what;
    EXPECT_EQ(z, size) << what;
    EXPECT_EQ(w, world0) << what << ": world rank of its member 0";
    int back = -2;
    SC_OK(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, me, t, &back));
    EXPECT_EQ(back, rank) << what << ": this rank translated from the world";
    for (int k = 0; k < 10; ++k) SC_OK(symcommBarrierOnStream(comm_, t, stream_));
    mp::sync(stream_);
  };
  symcommTeam_t row, col;
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, 3, &row, &col));
  expect_team(row, me % 3, std::min(3, n - me / 3 * 3), me / 3 * 3, "row of 3");
  expect_team(col, me / 3, (n - me % 3 + 2) / 3, me % 3, "column of the rows of 3");
  for (int k = 0; k < (n - me % 3 + 2) / 3; ++k) {
    int in_row = -2;  // member k of my column is world rank me % 3 + 3k: in my row iff k is mine
    SC_OK(symcommTeamTranslate(comm_, col, k, row, &in_row));
    EXPECT_EQ(in_row, k == me / 3 ? me % 3 : -1) << "column member " << k;
  }
  // The even ranks, then splits of that team; odd ranks take part with no parent.
  symcommTeam_t even, tail = SYMCOMM_TEAM_INVALID, erow, ecol;
  const int evens = (n + 1) / 2, e = me / 2;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, evens, &even));
  if (evens >= 2)  // the even team's members 1.. : world ranks 2, 4, ...
    SC_OK(symcommTeamSplitStrided(comm_, even, 1, 1, evens - 1, &tail));
  SC_OK(symcommTeamSplit2D(comm_, even, 2, &erow, &ecol));
  if (me % 2 == 0) {
    if (evens >= 2) {
      if (me == 0) EXPECT_EQ(tail, SYMCOMM_TEAM_INVALID);
      else expect_team(tail, e - 1, evens - 1, 2, "even ranks from 2");
    }
    expect_team(erow, e % 2, std::min(2, evens - e / 2 * 2), 4 * (e / 2), "row of the evens");
    expect_team(ecol, e / 2, (evens - e % 2 + 1) / 2, 2 * (e % 2), "column of the evens");
  } else {
    EXPECT_EQ(tail, SYMCOMM_TEAM_INVALID);
    EXPECT_EQ(erow, SYMCOMM_TEAM_INVALID);
    EXPECT_EQ(ecol, SYMCOMM_TEAM_INVALID);
  }
  for (symcommTeam_t t : {row, col, even, tail, erow, ecol})
    if (t != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, t));
}

// Making a team clears its barrier state on a stream of its own: it does not wait for other
// work on the GPU (here a kernel that runs for 3 s on another stream), as a whole-device
// synchronisation did; and the new team's barrier runs beside that kernel.
TEST_F(Rma, TeamSplitDoesNotWaitForOtherWork) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "GPU work: the cuda space only";
  char* a = static_cast<char*>(mp::local_alloc(64));
  char* b = static_cast<char*>(mp::local_alloc(64));
  mp::copy_after_early_trigger(stream_, a, b, 64, 1);  // loads the kernel before the timing
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  mp::copy_after_early_trigger(stream_, a, b, 64, 3000000);
  const auto start = std::chrono::steady_clock::now();
  symcommTeam_t team;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, mp::nranks(), &team));
  symcommStream_t other = mp::new_stream();
  for (int k = 0; k < 10; ++k) SC_OK(symcommBarrierOnStream(comm_, team, other));
  mp::sync(other);
  EXPECT_LT(seconds_since(start), 1.5) << "the split or the barriers waited for the kernel";
  mp::sync(stream_);
  SC_OK(symcommQuietOnStream(comm_, other));
  mp::free_stream(other);
  SC_OK(symcommTeamDestroy(comm_, team));
  mp::local_free(b);
  mp::local_free(a);
}

}  // namespace rma_test
