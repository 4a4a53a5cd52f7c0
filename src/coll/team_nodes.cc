#include "coll/team_nodes.h"

#include "base/error.h"

namespace symcomm {

bool spans_nodes(const Team& team, const Topology& topology) {
  const int first = topology.node_of[static_cast<size_t>(team.world_of(0))];
  for (int i = 1; i < team.size; ++i)
    if (topology.node_of[static_cast<size_t>(team.world_of(i))] != first) return true;
  return false;
}

Verdict team_nodes(const Team& team, int me, const Topology& topology, TeamNodes* out) {
  // Each node of the team in the order of its first member, and its members in team order.
  std::vector<int> index_of(static_cast<size_t>(topology.nnodes), -1);
  std::vector<std::vector<int>> nodes;
  for (int i = 0; i < team.size; ++i) {
    int& k = index_of[static_cast<size_t>(topology.node_of[static_cast<size_t>(team.world_of(i))])];
    if (k < 0) {
      k = static_cast<int>(nodes.size());
      nodes.emplace_back();
    }
    nodes[static_cast<size_t>(k)].push_back(i);
  }
  auto node_of = [&](const std::vector<int>& members) {
    return topology.node_of[static_cast<size_t>(team.world_of(members.front()))];
  };
  if (nodes.size() < 2)
    return Verdict::no(format("its members are all on node %d (the node's algorithms run it)",
                              node_of(nodes.front())));
  for (const std::vector<int>& n : nodes)
    if (n.size() != nodes.front().size())
      return Verdict::no(format(
          "node %d holds %zu of its members and node %d holds %zu: it needs as many on every "
          "node", node_of(nodes.front()), nodes.front().size(), node_of(n), n.size()));
  TeamNodes t;
  t.count = static_cast<int>(nodes.size());
  t.per_node = static_cast<int>(nodes.front().size());
  for (int k = 0; k < t.count; ++k)
    for (int l = 0; l < t.per_node; ++l) {
      const int m = nodes[static_cast<size_t>(k)][static_cast<size_t>(l)];
      t.member.push_back(m);
      if (m == me) t.node = k, t.local = l;
    }
  *out = std::move(t);
  return Verdict::yes();
}

}  // namespace symcomm
