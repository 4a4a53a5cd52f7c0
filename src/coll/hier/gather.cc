// hier's all-gather and broadcast. K nodes of L members; member (k, l) is local index l on
// node k; its rail is the K members of local index l.
//
// All-gather: each member's block crosses the network once per other node, to its rail's
// members (a rail sync), then every member reads, from each member l of its node, the K
// blocks of rail l (load/store; a node sync before). The network carries (K - 1) blocks per
// member where copy's puts carry (K - 1) L. Into a receive buffer that every member's
// transport writes in place (symmetric: the network writes the heap) the blocks land where
// they belong and the node phase reads the node peers' receive buffers; otherwise they go
// through the workspace in pieces, the rail's blocks in a slot per node, in two buffers used
// in turn, each piece ending with a node sync (the node peers have read it): a member writes
// a rail peer's buffer of piece p + 2 after the rail sync of piece p + 1, which the peer
// reaches after the node sync that ends piece p. (A node sync is a few stores, none where a
// node holds one member; a third buffer instead would make the pieces smaller.) Before the
// first piece a rail sync (the rail's members are in the call: only they write here); the
// last node sync leaves no member reading this rank's memory when the call returns.
//
// Broadcast from member (kr, lr): the message is cut into L chunks; the root puts chunk l to
// member l of its node (load/store; a sync of that node), each of which puts it to its rail's
// members on the other nodes (the network; a rail sync); then every member reads chunk l from
// member l of its node (a node sync before). Every member of the root's node sends 1 / L of
// the message over the network, to its own rail, where a flat broadcast sends all of it from
// the root to every member. In place or through two workspace buffers, as the all-gather.
#include <algorithm>

#include "coll/hier/call.h"

namespace symcomm::hier {

void all_gather(Call& c) {
  const CollArgs& a = c.a;
  const int K = c.K(), L = c.L(), n = a.team.size;
  const size_t B = a.count * a.elem;  // one member's block
  auto at = [&](int member) { return a.recv + static_cast<size_t>(member) * B; };
  const bool in_place = c.ctx.writable_in_place(a, a.recv, B * static_cast<size_t>(n));
  const size_t kk = static_cast<size_t>(K), U = in_place ? 0 : c.unit(2 * kk);
  c.rail_sync();
  if (in_place) {
    for (int k = 0; k < K; ++k) c.put(c.rail_member(k), at(a.me), a.send, B);
    c.rail_sync();
    c.node_sync();
    for (int l = 0; l < L; ++l)
      if (l != c.local())
        for (int k = 0; k < K; ++k) {
          const int m = c.nodes.at(k, l);
          c.get(c.node_member(l), at(m), at(m), B);
        }
    c.node_sync();
    return;
  }
  size_t p = 0;
  for (size_t off = 0; off < B; off += U, ++p) {
    const size_t len = std::min(U, B - off);
    char* rail = c.ctx.workspace() + p % 2 * kk * U;  // a slot per node
    for (int k = 0; k < K; ++k)
      c.put(c.rail_member(k), rail + static_cast<size_t>(c.node()) * U, a.send + off, len);
    c.rail_sync();
    c.node_sync();
    for (int l = 0; l < L; ++l)
      for (int k = 0; k < K; ++k)
        c.get(c.node_member(l), at(c.nodes.at(k, l)) + off, rail + static_cast<size_t>(k) * U, len);
    c.node_sync();
  }
}

void broadcast(Call& c) {
  const CollArgs& a = c.a;
  const int K = c.K(), L = c.L();
  const size_t e = a.elem, g = c.grain();
  int root_node = 0;
  for (int k = 0; k < K; ++k)
    for (int l = 0; l < L; ++l)
      if (c.nodes.at(k, l) == a.root) root_node = k;
  const bool root = a.me == a.root, root_side = c.node() == root_node;
  // In place: every member's receive buffer holds the message where its pieces pass; the
  // root's gets all of it first (its node peers read its chunk there).
  const bool in_place = c.ctx.writable_in_place(a, a.recv, a.count * e);
  const size_t U = in_place ? 0 : c.unit(2);
  c.node_sync();
  c.rail_sync();
  if (root && in_place) c.put(a.me, a.recv, a.send, a.count * e);
  // One pass over [e0, e0 + q) of the message, chunk l on member l of each node at `buf`
  // (this rank's address of the place on every member: recv, or a workspace buffer), ending
  // with a node sync (the node peers have read this rank's chunk).
  auto pass = [&](char* buf, size_t e0, size_t q) {
    if (root)
      for (int l = 0; l < L; ++l)
        if (!(in_place && l == c.local())) {
          const Span ch = part(q, L, l, g);
          c.put(c.node_member(l), buf + ch.begin * e, a.send + (e0 + ch.begin) * e, ch.count * e);
        }
    const Span mine = part(q, L, c.local(), g);
    if (root_side) {
      c.node_sync();
      for (int k = 0; k < K; ++k)
        if (k != root_node)
          c.put(c.rail_member(k), buf + mine.begin * e, buf + mine.begin * e, mine.count * e);
    }
    c.rail_sync();
    c.node_sync();
    if (root) {
      if (!in_place) c.put(a.me, a.recv + e0 * e, a.send + e0 * e, q * e);
    } else {
      for (int l = 0; l < L; ++l) {
        const Span ch = part(q, L, l, g);
        c.get(c.node_member(l), a.recv + (e0 + ch.begin) * e, buf + ch.begin * e, ch.count * e);
      }
    }
    c.node_sync();
  };
  if (in_place) {
    pass(a.recv, 0, a.count);
  } else {
    const size_t piece = U / e;
    size_t p = 0;
    for (size_t e0 = 0; e0 < a.count; e0 += piece, ++p)
      pass(c.ctx.workspace() + p % 2 * U, e0, std::min(piece, a.count - e0));
  }
}

}  // namespace symcomm::hier
