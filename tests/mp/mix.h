// What the random-sequence tests (CollMix, DecompMix, RmaMix) share: the seed, and the
// teams of a sequence.
#ifndef SYMCOMM_TESTS_MP_MIX_H_
#define SYMCOMM_TESTS_MP_MIX_H_

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mp.h"

namespace mp {

// The sequence's seed, the same on every rank: SYMCOMM_TEST_MIX_SEED (which repeats a
// sequence that failed: every failure message names its seed), else a random one.
inline uint64_t mix_seed() {
  const char* fixed = std::getenv("SYMCOMM_TEST_MIX_SEED");
  return agree(fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}());
}

// Captures what `issue()` enqueues on `stream` (false where a call failed) in a CUDA graph
// and replays it three times: before each replay `ready(run)` writes the run's data and
// returns what `check(that, when)` then checks, once every rank has checked the run before.
template <typename Issue, typename Ready, typename Check>
void capture_and_replay(symcommComm_t comm, symcommStream_t stream, Issue issue, Ready ready,
                        Check check) {
  SC_OK(symcommHostBarrier(comm));
  ASSERT_EQ(begin_capture(stream), 0);
  const bool issued = issue();
  void* graph = end_capture(stream);
  ASSERT_TRUE(issued);
  ASSERT_NE(graph, nullptr);
  for (int run = 1; run <= 3; ++run) {
    auto data = ready(run);
    SC_OK(symcommHostBarrier(comm));
    ASSERT_EQ(launch_graph(graph, stream), 0);
    check(std::move(data), "replay " + std::to_string(run));
    SC_OK(symcommHostBarrier(comm));  // every rank checked before the next replay writes
    if (!all_ok(!::testing::Test::HasFailure())) break;
  }
  destroy_graph(graph);
}

// The world, and this rank's row (xteam) and column (yteam) of symcommTeamSplit2D with rows
// of xr ranks (4 on 8 or more ranks that 4 divides, else 2 on an even count, else 1).
struct MixTeams {
  int n = 0, xr = 1;
  symcommTeam_t id[3] = {SYMCOMM_TEAM_WORLD, SYMCOMM_TEAM_INVALID, SYMCOMM_TEAM_INVALID};
  static constexpr const char* kNames[3] = {"world", "row", "column"};

  std::vector<int> node_of;  // every world rank's node in `comm`

  // Splits the world of `comm` (collective) and checks that every team is what members()
  // says; learns every rank's node.
  void make(symcommComm_t comm) {
    n = nranks();
    int node = 0, nodes_in_all = 0;
    SC_OK(symcommCommNode(comm, &node, &nodes_in_all));
    node_of.assign(static_cast<size_t>(n), 0);
    SC_OK(symcommHostAllgather(comm, &node, node_of.data(), sizeof node));
    xr = n >= 8 && n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
    SC_OK(symcommTeamSplit2D(comm, SYMCOMM_TEAM_WORLD, xr, &id[1], &id[2]));
    for (int kind = 0; kind < 3; ++kind) {
      const std::vector<int> m = members(kind, rank());
      int size = 0;
      SC_OK(symcommTeamSize(comm, id[kind], &size));
      ASSERT_EQ(size, static_cast<int>(m.size())) << kNames[kind];
      for (int i = 0; i < size; ++i) {
        int w = -1;
        SC_OK(symcommTeamTranslate(comm, id[kind], i, SYMCOMM_TEAM_WORLD, &w));
        ASSERT_EQ(w, m[static_cast<size_t>(i)]) << kNames[kind] << " member " << i;
      }
    }
  }
  // World ranks of the team of kind `kind` (0 world, 1 row, 2 column) that holds world rank
  // q, in team-rank order.
  std::vector<int> members(int kind, int q) const {
    std::vector<int> m;
    if (kind == 0) {
      for (int r = 0; r < n; ++r) m.push_back(r);
    } else if (kind == 1) {
      for (int i = 0; i < xr; ++i) m.push_back(q / xr * xr + i);
    } else {
      for (int r = q % xr; r < n; r += xr) m.push_back(r);
    }
    return m;
  }
  int size(int kind) const { return static_cast<int>(members(kind, 0).size()); }
  // The nodes that this rank's team of kind `kind` spans (as many as every other team of the
  // kind spans: rows and columns are alike).
  int nodes(int kind) const {
    std::vector<int> seen;
    for (int r : members(kind, rank()))
      if (std::find(seen.begin(), seen.end(), node_of[static_cast<size_t>(r)]) == seen.end())
        seen.push_back(node_of[static_cast<size_t>(r)]);
    return static_cast<int>(seen.size());
  }
  int rank_in(int kind, int q) const {
    const std::vector<int> m = members(kind, q);
    return static_cast<int>(std::find(m.begin(), m.end(), q) - m.begin());
  }
};

}  // namespace mp

#endif  // SYMCOMM_TESTS_MP_MIX_H_
