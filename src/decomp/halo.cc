#include "decomp/halo.h"

#include "base/error.h"

namespace symcomm {

HaloPlan plan_halo(const Geometry& g, int rank, int axis, int dim, const int64_t* halo,
                   const int64_t* padding, bool periodic) {
  SYMCOMM_REQUIRE(dim >= 0 && dim < 3, symcommInvalidArgument, "dim %d is not 0, 1 or 2", dim);
  const auto& c = g.config();
  const symcommPencilInfo_t p = g.pencil(rank, axis, halo, padding);
  HaloPlan plan;
  plan.dim = dim;
  const int64_t h = p.halo[dim], n = c.gdims[dim];
  if (h == 0) return plan;
  // Along `dim`: is it split, over the rows or the columns, and where am I?
  static const int kSplit[3][2] = {{1, 2}, {0, 2}, {0, 1}};
  int parts = 1, me = 0;
  bool over_rows = false;
  if (kSplit[axis][0] == dim) {
    parts = c.pdims[0];
    me = g.row_of(rank);
    over_rows = true;
  } else if (kSplit[axis][1] == dim) {
    parts = c.pdims[1];
    me = g.col_of(rank);
  }
  SYMCOMM_REQUIRE(h <= p.hi[dim] - p.lo[dim], symcommInvalidArgument,
                  "halo %lld along axis %d is larger than rank %d's %lld points", static_cast<long long>(h),
                  dim, rank, static_cast<long long>(p.hi[dim] - p.lo[dim]));
  for (int k = 0; k < parts; ++k)
    SYMCOMM_REQUIRE(split(n, parts, k).count >= h, symcommInvalidArgument,
                    "halo %lld along axis %d is larger than part %d's %lld points",
                    static_cast<long long>(h), dim, k, static_cast<long long>(split(n, parts, k).count));
  // The rank holding part k along dim (this rank itself where dim is not split).
  auto rank_of = [&](int k) {
    if (parts == 1) return rank;
    return over_rows ? g.rank_at(k, g.col_of(rank)) : g.rank_at(g.row_of(rank), k);
  };
  plan.self = parts == 1;
  plan.over_rows = over_rows;
  // The slabs span the allocated extent of the other axes (their halos included).
  Box base;
  for (int a = 0; a < 3; ++a) {
    base.lo[a] = p.lo[a] - p.halo[a];
    base.hi[a] = p.hi[a] + p.halo[a];
  }
  int64_t other = 1;
  for (int a = 0; a < 3; ++a)
    if (a != dim) other *= base.hi[a] - base.lo[a];
  plan.slab = h * other;
  const bool first = me == 0, last = me == parts - 1;
  // Low side: my halo [lo - h, lo) from the part below (its [lo - h, lo)), wrapping from the
  // top of the grid at the bottom boundary.
  if (!first || periodic) {
    plan.low.neighbour = rank_of((me + parts - 1) % parts);
    plan.low.recv = base;
    plan.low.recv.lo[dim] = p.lo[dim] - h;
    plan.low.recv.hi[dim] = p.lo[dim];
  }
  if (!last || periodic) {
    plan.high.neighbour = rank_of((me + 1) % parts);
    plan.high.recv = base;
    plan.high.recv.lo[dim] = p.hi[dim];
    plan.high.recv.hi[dim] = p.hi[dim] + h;
  }
  // What I send: my top slab to the part above (it fills that part's low halo) and my bottom
  // slab to the part below.
  plan.high.send = base;
  plan.high.send.lo[dim] = p.hi[dim] - h;
  plan.high.send.hi[dim] = p.hi[dim];
  plan.low.send = base;
  plan.low.send.lo[dim] = p.lo[dim];
  plan.low.send.hi[dim] = p.lo[dim] + h;
  return plan;
}

}  // namespace symcomm
