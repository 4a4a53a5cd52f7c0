// All-to-all-v's counts as every member of the team knows them, for the algorithms that move
// the blocks with host-side puts (copy, hier): each member puts its send counts, receive
// counts and receive displacements, and whether peers can write its receive buffer in place,
// into every member's workspace, through each member's transport. Every member then checks
// that each pair agrees (so all raise the same error), and knows where each block lands, how
// long the longest is, and whether every receive buffer takes the blocks in place (a member
// that receives nothing may pass a NULL recv: all then stage). Reading the table back
// synchronises the stream: not capturable in a CUDA graph.
#pragma once

#include <cstdint>
#include <vector>

#include "coll/coll.h"

namespace symcomm {

class AlltoallvTable {
 public:
  // Collective over a's team: a team barrier (every member is in the call: its workspace and
  // receive buffer are free), the puts, a team barrier, the read. The rows stay in the
  // workspace: the caller's next barrier comes before anything is written there.
  AlltoallvTable(const CollArgs& a, CollContext& ctx);

  // Elements member i sends member j.
  size_t sends(int i, int j) const { return at(i, 0, j); }
  // Where member j receives member i's block, in elements of its receive buffer.
  size_t displ(int j, int i) const { return at(j, 2, i); }
  // Every member's receive buffer is written in place by the others.
  bool in_place() const { return in_place_; }
  // The longest block, in bytes.
  size_t longest() const { return longest_; }

 private:
  // table 0: send counts, 1: receive counts, 2: receive displacements (member's row, entry j).
  size_t at(int member, int table, int j) const {
    return static_cast<size_t>(all_[static_cast<size_t>(member) * words_ +
                                    static_cast<size_t>(table * n_ + j)]);
  }

  int n_ = 0;
  size_t words_ = 0;
  std::vector<uint64_t> all_;
  bool in_place_ = true;
  size_t longest_ = 0;
};

}  // namespace symcomm
