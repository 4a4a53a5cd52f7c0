// A team seen as nodes (coll/team_nodes.h), the cut of a buffer into hier's parts
// (coll/hier/call.h), and the selection rows' scope: teams on one node.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coll/hier/call.h"
#include "coll/selection.h"
#include "coll/team_nodes.h"

namespace symcomm {
namespace {

// A topology of `nranks` ranks whose rank r is on node node_of[r], seen from rank `rank`.
Topology topology(const std::vector<int>& node_of, int rank) {
  Topology t;
  t.rank = rank;
  t.nranks = static_cast<int>(node_of.size());
  t.node_of = node_of;
  t.nnodes = 0;
  for (int n : node_of) t.nnodes = std::max(t.nnodes, n + 1);
  t.node = node_of[static_cast<size_t>(rank)];
  t.accessible.assign(node_of.size(), 0);
  for (size_t r = 0; r < node_of.size(); ++r) t.accessible[r] = node_of[r] == t.node;
  return t;
}

TEST(TeamNodes, SpansNodes) {
  const Topology t = topology({0, 0, 1, 1, 2, 2}, 0);
  EXPECT_TRUE(spans_nodes(Team{0, 1, 6}, t));
  EXPECT_FALSE(spans_nodes(Team{0, 1, 2}, t));
  EXPECT_TRUE(spans_nodes(Team{1, 2, 3}, t));  // ranks 1, 3, 5
  EXPECT_FALSE(spans_nodes(Team{2, 1, 1}, t));
  EXPECT_TRUE(spans_nodes(Team{1, 1, 2}, t));  // ranks 1, 2
}

// Nodes in the order of their first member, a node's members in team order, whichever way
// the ranks interleave; every member sees the same layout, and its own place in it.
TEST(TeamNodes, LayoutOfContiguousAndInterleavedNodes) {
  for (const std::vector<int>& node_of : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1, 0, 1},
                                          std::vector<int>{1, 0, 1, 0}}) {
    SCOPED_TRACE(::testing::PrintToString(node_of));
    for (int me = 0; me < 4; ++me) {
      TeamNodes n;
      ASSERT_TRUE(team_nodes(Team{0, 1, 4}, me, topology(node_of, me), &n).ok());
      EXPECT_EQ(n.count, 2);
      EXPECT_EQ(n.per_node, 2);
      // Node 0 is rank 0's; its members in team order.
      const bool contiguous = node_of[1] == node_of[0];
      EXPECT_EQ(n.member, contiguous ? std::vector<int>({0, 1, 2, 3}) : std::vector<int>({0, 2, 1, 3}));
      EXPECT_EQ(n.at(n.node, n.local), me);
    }
  }
  // A team of ranks 1, 3, 5 of 3 nodes of 2: 3 nodes of 1.
  TeamNodes n;
  ASSERT_TRUE(team_nodes(Team{1, 2, 3}, 2, topology({0, 0, 1, 1, 2, 2}, 5), &n).ok());
  EXPECT_EQ(n.count, 3);
  EXPECT_EQ(n.per_node, 1);
  EXPECT_EQ(n.node, 2);
  EXPECT_EQ(n.local, 0);
}

TEST(TeamNodes, OneNodeAndUnevenNodesAreRefusedWithTheReason) {
  TeamNodes n;
  Verdict v = team_nodes(Team{0, 1, 2}, 0, topology({0, 0, 1, 1}, 0), &n);
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.reason().find("all on node 0"), std::string::npos) << v.reason();
  v = team_nodes(Team{0, 1, 3}, 0, topology({0, 0, 1, 1}, 0), &n);
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.reason().find("node 0 holds 2 of its members and node 1 holds 1"), std::string::npos)
      << v.reason();
}

// hier's parts cover the total once, in order, each starting at a multiple of the grain.
TEST(HierParts, CoverTheTotalAtGrainBoundaries) {
  for (size_t total : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{100003}})
    for (int parts : {1, 2, 3, 4, 7})
      for (size_t grain : {size_t{1}, size_t{32}, size_t{64}}) {
        SCOPED_TRACE(std::to_string(total) + " in " + std::to_string(parts) + " by " +
                     std::to_string(grain));
        size_t at = 0, most = 0;
        for (int i = 0; i < parts; ++i) {
          const hier::Span s = hier::part(total, parts, i, grain);
          EXPECT_EQ(s.begin, at);
          if (s.count && s.begin + s.count < total) {
            EXPECT_EQ(s.begin % grain, 0u);
            EXPECT_EQ(s.count % grain, 0u);
          }
          at += s.count;
          most = std::max(most, s.count);
        }
        EXPECT_EQ(at, total);
        // No part is larger than an even share rounded up to grains: what the workspace's
        // areas are sized for.
        const size_t grains = (total + grain - 1) / grain;
        EXPECT_LE(most, (grains + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts) * grain);
      }
}

// The rows were measured on one node: none applies to a team that spans nodes.
TEST(SelectionTable, RowsApplyToTeamsOnOneNodeOnly) {
  for (const SelectionRow& row : selection_table()) {
    SelectionCall call{row.op, row.max_team ? row.max_team : 2, row.max_bytes ? row.max_bytes : 1,
                       true};
    EXPECT_TRUE(row_matches(row, call)) << row.file << ":" << row.line;
    call.across_nodes = true;
    EXPECT_FALSE(row_matches(row, call)) << row.file << ":" << row.line;
  }
}

}  // namespace
}  // namespace symcomm
