// A team seen as nodes: which of its members share a node. The automatic choice asks whether a
// team spans nodes (its table was measured on one node); the hierarchical algorithm (hier)
// runs its node phases among the members of one node and its network phases among the
// members of one rail: those with the same local index on every node.
#pragma once

#include <vector>

#include "base/registry.h"
#include "rma/team.h"
#include "topology/topology.h"

namespace symcomm {

// Whether the members of `team` are on more than one node (allocates nothing: the automatic
// choice asks at every call).
bool spans_nodes(const Team& team, const Topology& topology);

// The members of a team that spans nodes with as many members on each (L): nodes numbered in
// the order of their first member, the members of a node (its local indices) in team order.
struct TeamNodes {
  int count = 0;           // nodes the team spans (K)
  int per_node = 0;        // members on each (L)
  int node = 0;            // this rank's node, 0 .. K - 1
  int local = 0;           // this rank's local index, 0 .. L - 1
  std::vector<int> member; // [K * L]: the team rank of local index l on node k at k * L + l
  int at(int k, int l) const { return member[static_cast<size_t>(k * per_node + l)]; }
};

// The layout of `team` as seen by its member `me` (a team rank), or why the team does not
// lie over nodes evenly: all its members on one node, or nodes that hold different numbers
// of them. The same answer on every member.
Verdict team_nodes(const Team& team, int me, const Topology& topology, TeamNodes* out);

}  // namespace symcomm
