// The ce algorithm's rounds: what a round moves, the class that issues rounds (and a
// broadcast's chain) as copies and flag operations on the caller's stream and the state's
// side streams, and the operations built on them (ce_ops.cc, ce_broadcast.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "coll/ce_state.h"
#include "coll/coll.h"

namespace symcomm::ce {

// One copy of `bytes` bytes (dst as mapped here).
struct Copy {
  char* dst;
  const char* src;
  size_t bytes;
};

// What a round moves (see Rounds::run()).
struct Round {
  std::vector<std::pair<int, Copy>> out;  // team member, and the copy into its memory
  std::vector<int> in;                   // team members that write here
  std::vector<Copy> own;                 // local copies, on the side while the round runs
  std::vector<Copy> unpack;              // local copies once the members' data arrived
};

// Issues rounds on the caller's stream and the state's side streams.
class Rounds {
 public:
  // A broadcast as a pipelined chain (see broadcast()): this member receives from `prev`
  // and sends to `next` (team ranks, -1: none).
  struct Chain {
    int prev = -1, next = -1;
    const char* src = nullptr;  // what this member sends: the root's send, else its recv
    char* dst = nullptr;        // next's receive buffer, as mapped here
    size_t bytes = 0, chunk = 0;
    Copy own{};                 // the root's copy of its send into its recv (0 bytes: none)
  };

  Rounds(const CollArgs& a, CollContext& ctx, CeState& s)
      : a_(a), ctx_(ctx), s_(s), main_(a.stream), me_(a.team.world_of(a.me)) {}

  // The chain, on the caller's stream alone (ce_broadcast.cc).
  void chain(const Chain& ch);

  // One round (a symmetric receive buffer written in place, or one piece through the
  // workspace). For every pair of a sender s and a receiver r:
  //   r, caller's stream:  ready[r] on s := 1          r's slot (or receive buffer) is free
  //   s, caller's stream:  wait ready[r] >= 1
  //   s, a side stream:    copy to r; ready[r] := 0; done[s] on r := 1
  //   r, caller's stream:  wait done[s] >= 1; done[s] := 0; copies out of the slots
  // Every round leaves the words at 0, so every call issues the same operations.
  void run(const Round& r);

 private:
  // This rank's word of `kind` on team member j, as mapped here.
  uint64_t* peer(Kind kind, int j) const;

  void put(const Copy& c, cudaStream_t stream);

  // The caller's stream waits for the words of `kind` of `members` (team ranks), telling
  // the watchdog which group of waits it is in; `reset`: each word back to 0 once passed.
  void wait_all(Kind kind, const std::vector<int>& members, bool reset);
  // The caller's stream tells the watchdog that it reaches a group of waits, and that it
  // passed them.
  void announce(Kind kind, const std::vector<int>& worlds);
  void passed();

  // issue(i, stream) for items i < count: on the caller's stream for one item, else spread
  // over the side streams between a fork and a join.
  template <typename F>
  void spread(size_t count, F&& issue);

  const CollArgs& a_;
  CollContext& ctx_;
  CeState& s_;
  cudaStream_t main_;
  int me_;  // world rank
};

// The other members, starting after this one (so that not everyone writes to the same
// member first).
inline std::vector<int> peers(const CollArgs& a) {
  std::vector<int> v;
  for (int d = 1; d < a.team.size; ++d) v.push_back((a.me + d) % a.team.size);
  return v;
}

inline size_t at(int j, size_t bytes) { return static_cast<size_t>(j) * bytes; }

// The operations; `block`: the bytes of one block (see each operation).
// All-gather (my send to every member's block `me`) or all-to-all (my block j to member j).
void gather(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block, bool to_all);
// All-to-all-v, always through the workspace.
void gather_v(const CollArgs& a, CollContext& ctx, Rounds& rounds);
// Broadcast: a chain into symmetric receive buffers on teams of 3 or more, else the root
// copies to every member (ce_broadcast.cc).
void broadcast(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block);
// Reduce-scatter (`scatter`) or all-reduce: copies into the members' slots, then one local
// reduction kernel.
void reduce(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block, bool scatter);

}  // namespace symcomm::ce
