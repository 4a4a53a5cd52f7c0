// One call of the hier algorithm (coll/hier.cc): the team as nodes and rails, the moves and
// syncs its phases are made of, and the workspace cut into areas. The operations
// (hier/reduce.cc, hier/gather.cc, hier/exchange.cc) are written against this alone.
//
// Moves name places as the transports do: an address that stands for a place on a member
// (the workspace, a symmetric or registered buffer) is this rank's address of the same
// place. Members of this rank's node are reached by load/store, the others through their
// transport; every move and sync is issued on the call's stream, so that the same code runs
// in both memory spaces.
#pragma once

#include <vector>

#include "coll/coll.h"
#include "coll/hier/state.h"
#include "coll/team_nodes.h"

namespace symcomm::hier {

// Part `index` of `parts` of `total` elements, cut at multiples of `grain` elements (the last
// part may be shorter, and parts may be empty where total is small).
struct Span {
  size_t begin = 0, count = 0;
};
Span part(size_t total, int parts, int index, size_t grain);

class Call {
 public:
  Call(const CollArgs& a, CollContext& ctx, State& state, TeamNodes nodes);

  const CollArgs& a;
  CollContext& ctx;
  const TeamNodes nodes;
  int K() const { return nodes.count; }     // nodes
  int L() const { return nodes.per_node; }  // members per node
  int node() const { return nodes.node; }   // this rank's node
  int local() const { return nodes.local; } // this rank's local index
  // The team rank of local index l on this rank's node, and of this rank's local index on
  // node k.
  int node_member(int l) const { return nodes.at(nodes.node, l); }
  int rail_member(int k) const { return nodes.at(k, nodes.local); }
  // Elements per grain: parts of a buffer start 256 bytes apart at least.
  size_t grain() const { return 256 / a.elem; }

  // `bytes` from `src` (this rank's memory) to `dst` on member m: a local copy where m is
  // this rank (none where dst is src).
  void put(int m, void* dst, const void* src, size_t bytes);
  // `bytes` from `src` on member m (of this rank's node, or this rank) into `dst` here.
  void get(int m, void* dst, const void* src, size_t bytes);
  // dst[i] = op over k < n of the block at src + k * stride (elements of the call's type).
  void reduce(void* dst, const void* src, size_t stride, int n, size_t count);

  // Syncs (hier/state.h): among the members of this rank's node, among those of its rail,
  // and the team's barrier.
  void node_sync() {
    synced_ = true;
    state_.sync(a, ctx, Group::Node, node_members_);
  }
  void rail_sync() {
    synced_ = true;
    state_.sync(a, ctx, Group::Rail, rail_members_);
  }
  void team_barrier() { ctx.barrier(a); }

  // Whether the call has made a sync: a failure from then on leaves the members' epochs
  // apart (hier/state.h).
  bool synced() const { return synced_; }

  // The workspace as `units` equal units: the bytes of one (a multiple of 256); throws
  // symcommOutOfMemory naming SYMCOMM_COLL_WORKSPACE where a unit would be under 256 bytes.
  size_t unit(size_t units) const;

 private:
  State& state_;
  std::vector<int> node_members_, rail_members_;  // team ranks, this rank among them
  bool synced_ = false;
};

// The operations (a.count > 0: the caller returns first where it is 0).
void all_reduce(Call& c);
void reduce_scatter(Call& c);
void all_gather(Call& c);
void broadcast(Call& c);
void all_to_all(Call& c);
void all_to_all_v(Call& c);

}  // namespace symcomm::hier
