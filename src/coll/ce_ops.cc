// The ce all-gather, all-to-all, all-to-all-v, reduce-scatter and all-reduce, as rounds
// (the broadcast is in ce_broadcast.cc).
#include <algorithm>
#include <cstddef>

#include "coll/ce_rounds.h"

namespace symcomm::ce {

// All-gather (my send to every member's block `me`) or all-to-all (my block j to member j).
void gather(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block, bool to_all) {
  const int n = a.team.size;
  auto source = [&](int j) { return a.send + (to_all ? at(j, block) : 0); };
  char* mine = a.recv + at(a.me, block);
  const Copy own{mine, source(a.me), source(a.me) == mine ? 0 : block};
  if (ctx.addressable(a.recv, at(n, block))) {
    Round r;
    for (int j : peers(a)) {
      r.out.push_back({j, {ctx.on(a, mine, j), source(j), block}});
      r.in.push_back(j);
    }
    if (own.bytes) r.own.push_back(own);
    return rounds.run(r);
  }
  const size_t slot = ctx.workspace_slot(n, a.team.size);
  char* ws = ctx.workspace();
  for (size_t off = 0; off < block; off += slot) {
    const size_t len = std::min(slot, block - off);
    Round r;
    for (int j : peers(a)) {
      r.out.push_back({j, {ctx.on(a, ws + at(a.me, slot), j), source(j) + off, len}});
      r.in.push_back(j);
      r.unpack.push_back({a.recv + at(j, block) + off, ws + at(j, slot), len});
    }
    if (off == 0 && own.bytes) r.own.push_back(own);
    rounds.run(r);
  }
}

// All-to-all-v, always through the workspace (a sender does not know where its block goes
// in the receiver's buffer). The counts are trusted, as by sm: the message from s to r
// takes ceil(bytes / slot) rounds, which s and r both derive from their counts, and in
// round t every pair with a piece t exchanges it. Counts that disagree end in
// SYMCOMM_WAIT_TIMEOUT, or worse.
void gather_v(const CollArgs& a, CollContext& ctx, Rounds& rounds) {
  const int n = a.team.size;
  const size_t slot = ctx.workspace_slot(n, a.team.size);
  char* ws = ctx.workspace();
  auto out_bytes = [&](int j) { return a.send_counts[j] * a.elem; };
  auto in_bytes = [&](int j) { return a.recv_counts[j] * a.elem; };
  const Copy own{a.recv + a.recv_displs[a.me] * a.elem, a.send + a.send_displs[a.me] * a.elem,
                 out_bytes(a.me)};
  size_t longest = own.bytes ? 1 : 0;
  for (int j : peers(a)) longest = std::max({longest, out_bytes(j), in_bytes(j)});
  for (size_t off = 0; off < longest; off += slot) {
    Round r;
    for (int j : peers(a)) {
      if (out_bytes(j) > off)
        r.out.push_back({j, {ctx.on(a, ws + at(a.me, slot), j),
                             a.send + a.send_displs[j] * a.elem + off,
                             std::min(slot, out_bytes(j) - off)}});
      if (in_bytes(j) > off) {
        r.in.push_back(j);
        r.unpack.push_back({a.recv + a.recv_displs[j] * a.elem + off, ws + at(j, slot),
                            std::min(slot, in_bytes(j) - off)});
      }
    }
    if (off == 0 && own.bytes) r.own.push_back(own);
    rounds.run(r);
  }
}

// Reduce-scatter (my block j to member j's slot `me`) or all-reduce (my whole buffer to
// every member's slot `me`, one shot as in "copy"), then one local reduction kernel over
// the slots in team-rank order (the same result on every member).
void reduce(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block, bool scatter) {
  const int n = a.team.size;
  const size_t slot = ctx.workspace_slot(n, a.team.size);
  char* ws = ctx.workspace();
  for (size_t off = 0; off < block; off += slot) {
    const size_t len = std::min(slot, block - off);
    auto source = [&](int j) { return a.send + (scatter ? at(j, block) : 0) + off; };
    Round r;
    for (int j : peers(a)) {
      r.out.push_back({j, {ctx.on(a, ws + at(a.me, slot), j), source(j), len}});
      r.in.push_back(j);
    }
    r.own.push_back({ws + at(a.me, slot), source(a.me), len});
    rounds.run(r);
    ctx.copies().reduce(a.recv + off, ws, slot, n, len / a.elem, a.type, a.redop, a.stream);
  }
}

}  // namespace symcomm::ce
