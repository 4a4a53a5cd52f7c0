// hier's reductions, through the workspace in pieces. K nodes of L members; member (k, l) is
// local index l on node k; its rail is the K members of local index l.
//
// All-reduce, per piece: the piece is cut into L chunks, chunk l into K sub-chunks.
//   1. node reduce-scatter: every member puts chunk l to member l of its node (IN, a slot per
//      member); a node sync; member l sums its slots into OUT: chunk l over the node.
//   2. rail reduce-scatter: sub-chunk k of OUT to the rail's member on node k (RAIL, a slot
//      per node), through the network; a rail sync; each sums its slots into its sub-chunk
//      of OUT: the total, computed once, on one member, in a fixed order (every member
//      gets the same bits).
//   3. rail all-gather: each puts its sub-chunk to the same place of OUT on the rail's other
//      members; a rail sync.
//   4. node all-gather: a node sync, then each member reads chunk l from member l's OUT into
//      its receive buffer (load/store: plain receive buffers too).
// The network carries 2 (K - 1) / K of a chunk per member, a chunk being 1 / L of the buffer,
// where copy's puts carry (K - 1) L times the buffer. Before the first piece a node and a rail
// sync (the members' workspaces are free); after the last a node sync (no member reads this
// rank's workspace any more when the call returns). Within the call: a member writes IN of a
// node peer after the node sync of step 4 of the piece before (the peer has summed its IN),
// RAIL of a rail peer after the rail sync of step 3 (summed), OUT of a rail peer after the
// rail sync of step 2, which the peer reaches after the node sync of step 1, when its node
// peers have read its OUT of the piece before.
//
// Reduce-scatter, per piece of every block: member (k, l) receives block (k, l).
//   1. every member puts to member l of its node the pieces of the blocks of rail l (K of
//      them, IN); a node sync; member l sums them over the node (PART).
//   2. PART's block of member (k, l) to that member (RAIL), through the network; a rail sync;
//      each sums its slots into its receive buffer.
// IN and RAIL alternate between two buffers from one piece to the next: a member writes a
// peer's buffer of piece p + 2 after a sync of piece p + 1 that the peer reaches only once
// it has summed that buffer of piece p. The network carries (K - 1) of a block per member
// where copy's carries (K - 1) L. Nothing is read from a peer: no sync after the last piece.
#include <algorithm>

#include "coll/hier/call.h"

namespace symcomm::hier {

void all_reduce(Call& c) {
  const CollArgs& a = c.a;
  const int K = c.K(), L = c.L();
  const size_t e = a.elem, g = c.grain();
  // Units of a sub-chunk's room U: IN holds L chunks of K units (none where L is 1: the
  // node's sum is this rank's send), RAIL K units, OUT K units (a chunk).
  const size_t kk = static_cast<size_t>(K), ll = static_cast<size_t>(L);
  const size_t U = c.unit((L > 1 ? ll * kk : 0) + 2 * kk), C = kk * U;
  char* in = c.ctx.workspace();
  char* rail = in + (L > 1 ? ll * C : 0);
  char* out = rail + kk * U;
  const size_t piece = ll * C / e;  // elements: every chunk fits C, every sub-chunk U
  if (L > 1) c.node_sync();
  c.rail_sync();
  for (size_t e0 = 0; e0 < a.count; e0 += piece) {
    const size_t q = std::min(piece, a.count - e0);
    const Span mine = part(q, L, c.local(), g);
    const char* sum = a.send + (e0 + mine.begin) * e;  // chunk l over the node
    if (L > 1) {
      for (int l = 0; l < L; ++l) {
        const Span ch = part(q, L, l, g);
        c.put(c.node_member(l), in + static_cast<size_t>(c.local()) * C, a.send + (e0 + ch.begin) * e,
              ch.count * e);
      }
      c.node_sync();
      c.reduce(out, in, C, L, mine.count);
      sum = out;
    }
    for (int k = 0; k < K; ++k) {
      const Span s = part(mine.count, K, k, g);
      c.put(c.rail_member(k), rail + static_cast<size_t>(c.node()) * U, sum + s.begin * e, s.count * e);
    }
    c.rail_sync();
    const Span sub = part(mine.count, K, c.node(), g);
    char* total = out + sub.begin * e;
    c.reduce(total, rail, U, K, sub.count);
    for (int k = 0; k < K; ++k)
      if (k != c.node()) c.put(c.rail_member(k), total, total, sub.count * e);
    c.rail_sync();
    if (L > 1) c.node_sync();
    for (int l = 0; l < L; ++l) {
      const Span ch = part(q, L, l, g);
      c.get(c.node_member(l), a.recv + (e0 + ch.begin) * e, out, ch.count * e);
    }
  }
  if (L > 1) c.node_sync();
}

void reduce_scatter(Call& c) {
  const CollArgs& a = c.a;
  const int K = c.K(), L = c.L();
  const size_t e = a.elem, kk = static_cast<size_t>(K), ll = static_cast<size_t>(L);
  // Units of a block's piece U: IN 2 x L x K (none where L is 1: the sums are the send's
  // blocks), PART K, RAIL 2 x K.
  const size_t U = c.unit(L > 1 ? 2 * ll * kk + kk + 2 * kk : 2 * kk);
  char* in = c.ctx.workspace();
  char* sum = in + (L > 1 ? 2 * ll * kk * U : 0);
  char* rail = sum + (L > 1 ? kk * U : 0);
  const size_t piece = U / e;
  auto block = [&](int member, size_t e0) {  // of the send: the block for member, at e0
    return a.send + (static_cast<size_t>(member) * a.count + e0) * e;
  };
  if (L > 1) c.node_sync();
  c.rail_sync();
  size_t p = 0;
  for (size_t e0 = 0; e0 < a.count; e0 += piece, ++p) {
    const size_t q = std::min(piece, a.count - e0), b = p % 2;
    char* in_b = in + b * ll * kk * U;
    char* rail_b = rail + b * kk * U;
    if (L > 1) {
      for (int l = 0; l < L; ++l)
        for (int k = 0; k < K; ++k)
          c.put(c.node_member(l), in_b + (static_cast<size_t>(c.local()) * kk + static_cast<size_t>(k)) * U,
                block(c.nodes.at(k, l), e0), q * e);
      c.node_sync();
      for (int k = 0; k < K; ++k)
        c.reduce(sum + static_cast<size_t>(k) * U, in_b + static_cast<size_t>(k) * U, kk * U, L, q);
    }
    for (int k = 0; k < K; ++k)
      c.put(c.rail_member(k), rail_b + static_cast<size_t>(c.node()) * U,
            L > 1 ? sum + static_cast<size_t>(k) * U : block(c.rail_member(k), e0), q * e);
    c.rail_sync();
    c.reduce(a.recv + e0 * e, rail_b, U, K, q);
  }
}

}  // namespace symcomm::hier
