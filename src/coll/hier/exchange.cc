// hier's all-to-all and all-to-all-v: every block goes straight to its member, the blocks for
// other nodes through the network first, then those of this rank's node by load/store, so
// that where the network's transfers proceed beside the stream's later work (a proxy) the
// node's copies run while they do. No relay through a node peer: each block crosses the
// network once whichever way, and a relay would copy it once more.
//
// Into receive buffers that every member's transport writes in place (symmetric), between
// two team barriers. Otherwise through the workspace in pieces, a slot per member, in two
// buffers used in turn: one team barrier per piece (every piece arrived, and every member
// is done with the buffer of the piece before, which the next piece's puts may fill), then
// each member copies its slots out. All-to-all-v first gathers every member's counts
// (coll/alltoallv_table.h), which reads them back on the host.
#include <algorithm>

#include "coll/alltoallv_table.h"
#include "coll/hier/call.h"

namespace symcomm::hier {

namespace {

// The team's members, those on other nodes first, each list starting after this rank (so
// that members do not all send to the same one first); this rank last.
std::vector<int> remote_first(const Call& c) {
  const int n = c.a.team.size;
  std::vector<int> order;
  for (int pass = 0; pass < 2; ++pass)
    for (int s = 1; s < n; ++s) {
      const int j = (c.a.me + s) % n;
      bool on_node = false;
      for (int l = 0; l < c.L(); ++l) on_node = on_node || c.node_member(l) == j;
      if (on_node == (pass == 1)) order.push_back(j);
    }
  order.push_back(c.a.me);
  return order;
}

// The blocks: member j gets `len(j, off)` bytes from send_at(j) + off, landing at
// recv_at(j) (this rank's address of the place on j) in place; or through slots of the
// workspace, where this rank takes `len_from(i, off)` bytes from member i's slot to
// recv_from(i) + off. `longest`: the longest block on any member, in bytes.
template <typename SendAt, typename Len, typename RecvAt, typename LenFrom, typename RecvFrom>
void exchange(Call& c, bool in_place, size_t longest, SendAt send_at, Len len, RecvAt recv_at,
              LenFrom len_from, RecvFrom recv_from) {
  const CollArgs& a = c.a;
  const int n = a.team.size;
  const std::vector<int> order = remote_first(c);
  if (in_place) {
    for (int j : order) c.put(j, recv_at(j), send_at(j), len(j, 0));
    c.team_barrier();
    return;
  }
  const size_t nn = static_cast<size_t>(n), U = c.unit(2 * nn);
  c.team_barrier();
  size_t p = 0;
  for (size_t off = 0; off < longest; off += U, ++p) {
    char* slots = c.ctx.workspace() + p % 2 * nn * U;
    for (int j : order) {
      const size_t bytes = std::min(U, len(j, off));
      if (j == a.me) c.put(j, recv_from(j) + off, send_at(j) + off, bytes);
      else c.put(j, slots + static_cast<size_t>(a.me) * U, send_at(j) + off, bytes);
    }
    c.team_barrier();
    for (int i = 0; i < n; ++i)
      if (i != a.me)
        c.put(a.me, recv_from(i) + off, slots + static_cast<size_t>(i) * U, std::min(U, len_from(i, off)));
  }
}

// Bytes of a block of `total` bytes from `off` on.
size_t rest(size_t total, size_t off) { return total > off ? total - off : 0; }

}  // namespace

void all_to_all(Call& c) {
  const CollArgs& a = c.a;
  const size_t B = a.count * a.elem;
  auto block = [&](const char* p, int j) { return p + static_cast<size_t>(j) * B; };
  const bool in_place = c.ctx.writable_in_place(a, a.recv, B * static_cast<size_t>(a.team.size));
  // In place every member starts writing peers' receive buffers: a barrier first.
  if (in_place) c.team_barrier();
  exchange(
      c, in_place, B, [&](int j) { return block(a.send, j); },
      [&](int, size_t off) { return rest(B, off); },
      [&](int) { return a.recv + static_cast<size_t>(a.me) * B; },
      [&](int, size_t off) { return rest(B, off); },
      [&](int i) { return a.recv + static_cast<size_t>(i) * B; });
}

void all_to_all_v(Call& c) {
  const CollArgs& a = c.a;
  const size_t e = a.elem;
  const AlltoallvTable table(a, c.ctx);  // its barriers: every member is in the call
  exchange(
      c, table.in_place(), table.longest(),
      [&](int j) { return a.send + a.send_displs[j] * e; },
      [&](int j, size_t off) { return rest(a.send_counts[j] * e, off); },
      [&](int j) { return a.recv + table.displ(j, a.me) * e; },
      [&](int i, size_t off) { return rest(a.recv_counts[i] * e, off); },
      [&](int i) { return a.recv + a.recv_displs[i] * e; });
}

}  // namespace symcomm::hier
