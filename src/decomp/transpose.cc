#include "decomp/transpose.h"

#include <algorithm>

#include "base/error.h"

namespace symcomm {

int64_t Box::count() const {
  int64_t n = 1;
  for (int a = 0; a < 3; ++a) n *= std::max<int64_t>(0, hi[a] - lo[a]);
  return n;
}

static Box intersect(const symcommPencilInfo_t& a, const symcommPencilInfo_t& b) {
  Box box;
  for (int i = 0; i < 3; ++i) {
    box.lo[i] = std::max(a.lo[i], b.lo[i]);
    box.hi[i] = std::max(box.lo[i], std::min(a.hi[i], b.hi[i]));
  }
  return box;
}

ExchangePlan plan_exchange(const Geometry& g, int rank, int from, int to) {
  const bool xy = (from == 0 && to == 1) || (from == 1 && to == 0);
  const bool yz = (from == 1 && to == 2) || (from == 2 && to == 1);
  SYMCOMM_REQUIRE(xy || yz, symcommInvalidArgument,
                  "a transpose goes X<->Y or Y<->Z, not %d -> %d", from, to);
  const auto& c = g.config();
  ExchangePlan p;
  // X<->Y keeps z (split over columns): the ranks of this column. Y<->Z keeps x (split over
  // rows): the ranks of this row.
  const int n = xy ? c.pdims[0] : c.pdims[1];
  for (int k = 0; k < n; ++k) {
    int member = xy ? g.rank_at(k, g.col_of(rank)) : g.rank_at(g.row_of(rank), k);
    if (member == rank) p.me = k;
    p.members.push_back(member);
  }
  const symcommPencilInfo_t mine_from = g.pencil(rank, from, nullptr, nullptr);
  const symcommPencilInfo_t mine_to = g.pencil(rank, to, nullptr, nullptr);
  int64_t send_total = 0, recv_total = 0;
  for (int member : p.members) {
    const symcommPencilInfo_t their_to = g.pencil(member, to, nullptr, nullptr);
    const symcommPencilInfo_t their_from = g.pencil(member, from, nullptr, nullptr);
    p.send.push_back(intersect(mine_from, their_to));
    p.recv.push_back(intersect(their_from, mine_to));
    p.send_off.push_back(send_total);
    p.recv_off.push_back(recv_total);
    send_total += p.send.back().count();
    recv_total += p.recv.back().count();
    // Where my block lands in `member`'s receive area: after the blocks of the members
    // before me, as the member's own plan orders them.
    int64_t at = 0;
    for (int k = 0; k < p.me; ++k)
      at += intersect(g.pencil(p.members[static_cast<size_t>(k)], from, nullptr, nullptr), their_to)
                .count();
    p.remote_off.push_back(at);
  }
  return p;
}

int64_t staging_elements(const Geometry& g) {
  const int nranks = g.config().pdims[0] * g.config().pdims[1];
  int64_t most = 0;
  for (int r = 0; r < nranks; ++r)
    for (int axis = 0; axis < 3; ++axis) {
      // A rank sends at most its whole pencil and receives at most its whole pencil.
      symcommPencilInfo_t p = g.pencil(r, axis, nullptr, nullptr);
      most = std::max(most, (p.hi[0] - p.lo[0]) * (p.hi[1] - p.lo[1]) * (p.hi[2] - p.lo[2]));
    }
  return most;
}

BoxLayout pencil_layout(const symcommPencilInfo_t& p) {
  BoxLayout l{};
  l.stride[p.order[0]] = 1;
  l.stride[p.order[1]] = p.shape[0];
  l.stride[p.order[2]] = p.shape[0] * p.shape[1];
  for (int a = 0; a < 3; ++a) l.origin[a] = p.lo[a] - p.halo[a];
  return l;
}

BoxLayout packed_layout(const Box& b) {
  BoxLayout l{};
  const int64_t ex = b.hi[0] - b.lo[0], ey = b.hi[1] - b.lo[1];
  l.stride[0] = 1;
  l.stride[1] = ex;
  l.stride[2] = ex * ey;
  for (int a = 0; a < 3; ++a) l.origin[a] = b.lo[a];
  return l;
}

}  // namespace symcomm
