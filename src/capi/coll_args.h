// What the collectives' entry points (coll.cc) and their queries (coll_query.cc) share.
#pragma once

#include <string>
#include <vector>

#include "capi/comm.h"
#include "coll/coll.h"

namespace symcomm::capi {

// Element counts beyond this are refused: counts and extents times the element size (and
// the team size) stay far from overflowing.
size_t max_elems(size_t elem);

// What every collective shares: the team, this rank's place in it, the type, op and root.
CollArgs base_args(symcommComm& c, CollOp op, symcommTeam_t team, size_t count,
                   symcommDataType_t type, symcommRedOp_t redop, int root,
                   symcommStream_t stream);

// Throws symcommInvalidArgument naming `what` unless [p, p + bytes) is a symmetric buffer
// inside its allocation (past its end are other allocations) or memory this rank's GPU
// accesses (not pageable host memory, not another GPU's: refused here rather than left to
// fault in a kernel).
void require_reach(symcommComm& c, const void* p, size_t bytes, const char* what);

// An all-reduce of each of `parts` (buffers the caller checked, none overlapping another's;
// at least 2 members) as one call of ll's segmented kernel (coll/ll.cu), with the agreement
// check as every collective has it: false, having done nothing, where ll cannot run it here
// (another memory space, a team across nodes, an average, too many parts).
bool all_reduce_segments(symcommComm& c, symcommTeam_t team, const std::vector<CollSegment>& parts,
                         symcommDataType_t type, symcommRedOp_t op, symcommStream_t stream);

// A call's text for its error messages.
std::string describe(const char* fn, symcommTeam_t team, size_t count, symcommDataType_t type,
                     const char* algorithm);

}  // namespace symcomm::capi
