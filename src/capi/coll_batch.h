// Small all-reduces queued in one group (symcommGroupStart / End) run together: the group's
// end packs the buffers of neighbouring all-reduces of one communicator, team, type,
// reduction and stream into one buffer (one copy launch), runs one all-reduce of it, and
// unpacks the results (one more), where they would otherwise take a launch and a collective
// each: NCCL's grouped small all-reduces, which PyTorch issues for many small gradients.
#pragma once

#include <vector>

#include "coll/p2p.h"

namespace symcomm::capi {

// Replaces each run of two or more packable all-reduces in `collectives` (in their order)
// by one call that runs them packed. A run holds calls of at most SYMCOMM_GROUP_PACK_BYTES
// each and SYMCOMM_GROUP_PACK_TOTAL in all, and ends before a call whose send overlaps the
// recv of an earlier call of the run (which, run in turn, would read that call's result).
void pack_all_reduces(std::vector<Group::Collective>& collectives);

}  // namespace symcomm::capi
