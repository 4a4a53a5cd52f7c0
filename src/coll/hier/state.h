// What the hier algorithm keeps per communicator: the symmetric words of its syncs.
//
// A sync is a barrier of a group of a team's members alone: the members of one node, or of
// one rail (the members with the same local index on every node). Each member adds 1 to its
// word on every other member of the group through that member's transport (a signal: on the
// node by load/store, over the network one that lands after everything this rank put to
// that member before it), then counts the sync in its own memory and waits until every
// other member's word on it has reached the count (RmaBackend::wait_counted). So a sync also
// says that whatever the others put here before it has landed. Nothing is counted on the
// host: the replays of a CUDA graph that captured a call count on. The words sit per team
// id, kind of group and sending rank ([SYMCOMM_MAX_TEAMS][2][nranks]), the counts per team
// id and kind: the groups of one kind in a team are disjoint, so one row per kind serves all
// of them. Every member of a group makes the same syncs of it in the same order (each call's
// sequence follows from its arguments, the same on every member), so that the counts agree
// everywhere. A team id's words and counts start again from zero when a new team takes the
// id (Rma::on_team_start).
#pragma once

#include <cstdint>
#include <vector>

#include "coll/coll.h"

namespace symcomm::hier {

enum class Group { Node = 0, Rail = 1 };

class State final : public AlgorithmState {
 public:
  // Collective over the communicator: allocates and clears the words.
  explicit State(CollContext& ctx);

  // The sync of `members` (team ranks, this rank among them) as a group of kind `kind`, on
  // the call's stream. Waits are bounded by SYMCOMM_WAIT_TIMEOUT and end when the
  // communicator is aborted; a failure is thrown and marks the state failed.
  void sync(const CollArgs& a, CollContext& ctx, Group kind, const std::vector<int>& members);

  // A call failed part of the way (a wait, a transfer): the members' epochs may no longer
  // agree, so every later call is refused (run() checks).
  void fail() { failed_ = true; }
  bool failed() const { return failed_; }

 private:
  // This rank's word that world rank `from` sets, for team id `id` and kind `kind`.
  uint64_t* word(symcommTeam_t id, Group kind, int from) const;
  // This rank's count of the syncs of kind `kind` of team id `id`.
  uint64_t* count(symcommTeam_t id, Group kind) const;

  uint64_t* words_ = nullptr;
  int nranks_ = 0, rank_ = 0;
  bool failed_ = false;
};

}  // namespace symcomm::hier
