// Small all-reduces queued in one group (symcommGroupStart / End) run together, where they
// would otherwise take a launch and a collective each: NCCL's grouped small all-reduces,
// which PyTorch issues for many small gradients. Neighbouring all-reduces of one
// communicator, team, type, reduction and stream form a run; the group's end runs it as one
// kernel of ll that reads each call's send and writes its recv (up to
// SYMCOMM_GROUP_LL_BYTES, where ll can: the cuda space, a team of one node), else packs the
// buffers into one (one copy launch), runs one all-reduce of it and unpacks the results
// (one more).
#pragma once

#include <vector>

#include "coll/p2p.h"

namespace symcomm::capi {

// Replaces each run of two or more packable all-reduces in `collectives` (in their order)
// by one call that runs them packed. A run holds calls of at most SYMCOMM_GROUP_PACK_BYTES
// each and SYMCOMM_GROUP_PACK_TOTAL in all, at most 64 (ll's most buffers), and ends before
// a call with a buffer that overlaps a buffer of another call of the run (run in turn, one
// would read or overwrite another's result) or whose send and recv overlap other than in
// place (it runs alone, where its checks refuse it).
void pack_all_reduces(std::vector<Group::Collective>& collectives);

}  // namespace symcomm::capi
