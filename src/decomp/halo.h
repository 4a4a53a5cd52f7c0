// Halo exchanges: which slab of a pencil goes to which neighbour along one axis, and where
// it lands. A slab travels packed (x fastest), so it unpacks into a box of the same
// extents at the receiver's coordinates: wrapping around needs no special case.
#pragma once

#include "decomp/geometry.h"
#include "decomp/transpose.h"

namespace symcomm {

struct HaloSide {
  int neighbour = -1;  // world rank, or -1: nothing crosses this side
  Box send;            // my slab, in my coordinates
  Box recv;            // my halo it fills, in my coordinates (same extents as the slab)
};

struct HaloPlan {
  int dim;
  bool self = false;   // the axis is not split: both sides are this rank
  bool over_rows = false;  // split over the rows (the column team exchanges), else columns
  HaloSide low, high;  // my low halo is filled by `low.neighbour`'s high slab, and so on
  int64_t slab = 0;    // elements of the largest slab on any rank (workspace slots)
};

// Throws symcommInvalidArgument where a part holds fewer points than the halo.
HaloPlan plan_halo(const Geometry& g, int rank, int axis, int dim, const int64_t* halo,
                   const int64_t* padding, bool periodic);

}  // namespace symcomm
