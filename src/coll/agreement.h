// The agreement check of collective calls (SYMCOMM_COLL_CHECK): before a collective runs,
// the members of its team compare what each of them passed, through the bootstrap, and a
// disagreement fails the call on every member with the same message, naming the field and
// both sides. A debugging aid: calls that disagree otherwise end at SYMCOMM_WAIT_TIMEOUT at
// best, and at worst complete with wrong data (all-to-all-v counts that do not pair up,
// symmetric buffers at different offsets that peers write in place).
#pragma once

#include <string>

#include "coll/coll.h"

namespace symcomm {

// Whether SYMCOMM_COLL_CHECK is on in `space` (CollContext reads it once per communicator):
// by default in the host space only.
bool coll_check_requested(symcommMemorySpace_t space);

// Collective over a.team (a host round trip through team rank 0): throws
// symcommInvalidUsage, with the same message on every member, where the members disagree
// on the operation, the type, the count (not all-to-all-v's), the reduction, the root, the
// counts on the device or not, the kind of buffers (symmetric or registered, or not), the
// heap offset or registration and offset of symmetric buffers, the algorithm each chose
// (`text`: its name, or why none could run), or pairwise on host all-to-all-v counts
// (recvcounts[i] of member j against sendcounts[j] of member i); or where a member
// `refused` the call (`text` says why; of `a`, only the team, team_id and me are then read).
// Records and verdicts carry the call's number on the team, so that members never pair
// different calls: where a member skipped a call (or made them in another order), came late
// (past SYMCOMM_BOOTSTRAP_TIMEOUT) or gave up waiting, the call fails with symcommTimeout on
// every member, and so do every later check of the team (its collectives with it).
void check_agreement(const CollArgs& a, const std::string& text, bool refused, CollContext& ctx);

// The same for symcommBarrierOnStream on team `id` (this rank is member `me`): barriers and
// collectives of a team take turns in one sequence, so a member at a barrier while another
// is at a collective fails both ("passes operation barrier").
void check_barrier_agreement(symcommTeam_t id, const Team& team, int me, CollContext& ctx);

}  // namespace symcomm
