// A ce broadcast: into symmetric receive buffers on teams of 3 or more a pipelined chain
// of chunks (every member receives the message once and sends it once), else the root
// copies to every member.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/cuda_runtime_check.h"
#include "base/param.h"
#include "coll/ce_rounds.h"

namespace symcomm::ce {

namespace {

const IntParam kChainChunks("SYMCOMM_COLL_CE_CHAIN_CHUNKS", "0",
                            "chunks of a ce broadcast's chain (teams of 3 or more, symmetric "
                            "receive buffers), 1 to 1024; 0: from the size and the team "
                            "(must be the same on every rank)", 0, 1024);

// How many chunks a broadcast's chain cuts `bytes` into on a team of n: each chunk costs
// a forwarding member three memory operations (some 5 us) and the last chunk crosses
// n - 1 links, so for T the message's time on one link, (K + n - 2) (T / K + 5 us) is
// least at K = sqrt((n - 2) T / 5 us).
size_t chain_chunk(size_t bytes, int n) {
  int64_t k = kChainChunks.get();
  if (k == 0) {
    // 390 GB/s: one copy engine's copy to a peer (bench/results/h200x4/ce_a2a_probe.log)
    const double link_us = static_cast<double>(bytes) / 390e3;
    k = std::clamp<int64_t>(std::llround(std::sqrt((n - 2) * link_us / 5.0)), 1, 64);
  }
  const size_t unit = size_t{64} << 10;  // chunks of whole 64 KiB but the last
  const size_t chunk = (bytes + static_cast<size_t>(k) - 1) / static_cast<size_t>(k);
  return std::max(unit, (chunk + unit - 1) / unit * unit);
}

}  // namespace

// The chain, on the caller's stream alone:
//   prev's ready := 1                       (this member's receive buffer is free)
//   wait ready[next] >= 1; ready[next] := 0
//   for each chunk c: wait done[prev] >= c + 1; copy chunk c to next; next's done := c + 1
//   done[prev] := 0
// The done words count chunks in a call and go back to 0 at its end: prev writes the
// word again only after this member's next ready, which follows the reset on this
// stream; next writes ready again only after the last chunk's signal, which follows the
// reset of ready here (the signal's barrier orders it). The last member waits only for
// the last chunk. Every call issues the same operations (graphs replay it).
void Rounds::chain(const Chain& ch) {
  if (ch.own.bytes) {
    SYMCOMM_CUDART(cudaEventRecord(s_.aside_fork(), main_));
    SYMCOMM_CUDART(cudaStreamWaitEvent(s_.aside(), s_.aside_fork(), 0));
    put(ch.own, s_.aside());
  }
  if (ch.prev >= 0)
    s_.write32(main_, low_half(peer(kReady, ch.prev)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (ch.next >= 0) wait_all(kReady, {ch.next}, true);
  const size_t chunks = (ch.bytes + ch.chunk - 1) / ch.chunk;
  uint64_t* from = ch.prev >= 0 ? s_.word(kDone, a_.team.world_of(ch.prev)) : nullptr;
  if (from) announce(kChunk, {a_.team.world_of(ch.prev)});
  for (size_t c = 0; c < chunks; ++c) {
    if (from && (ch.next >= 0 || c + 1 == chunks)) s_.wait_geq(main_, from, c + 1);
    if (ch.next < 0) continue;
    const size_t off = c * ch.chunk;
    put({ch.dst + off, ch.src + off, std::min(ch.chunk, ch.bytes - off)}, main_);
    s_.write32(main_, low_half(peer(kDone, ch.next)), static_cast<uint32_t>(c + 1),
               CU_STREAM_WRITE_VALUE_DEFAULT);
  }
  if (from) {
    s_.write32(main_, low_half(from), 0, kWrite);
    passed();
  }
  if (ch.own.bytes) {
    SYMCOMM_CUDART(cudaEventRecord(s_.aside_join(), s_.aside()));
    SYMCOMM_CUDART(cudaStreamWaitEvent(main_, s_.aside_join(), 0));
  }
}

// A broadcast. Into symmetric receive buffers on teams of 3 or more, a pipelined chain:
// the members in team order from the root, each copying chunk c into the next member's
// receive buffer as soon as chunk c has reached its own (Rounds::chain), so every GPU
// receives the message once and sends it once, where a root that copies to every member
// sends it n - 1 times. On two members, and through the workspace, the root copies to
// every member.
void broadcast(const CollArgs& a, CollContext& ctx, Rounds& rounds, size_t block) {
  const bool root = a.me == a.root;
  const Copy own{a.recv, a.send, root && a.send != a.recv ? block : 0};
  const int n = a.team.size;
  if (n >= 3 && ctx.addressable(a.recv, block)) {
    const int pos = (a.me - a.root + n) % n;  // place in the chain
    Rounds::Chain ch;
    ch.prev = pos > 0 ? (a.me + n - 1) % n : -1;
    ch.next = pos + 1 < n ? (a.me + 1) % n : -1;
    ch.src = root ? a.send : a.recv;
    ch.dst = ch.next >= 0 ? ctx.on(a, a.recv, ch.next) : nullptr;
    ch.bytes = block;
    ch.chunk = chain_chunk(block, n);
    ch.own = own;
    return rounds.chain(ch);
  }
  if (ctx.addressable(a.recv, block)) {
    Round r;
    if (root)
      for (int j : peers(a)) r.out.push_back({j, {ctx.on(a, a.recv, j), a.send, block}});
    else
      r.in.push_back(a.root);
    if (own.bytes) r.own.push_back(own);
    return rounds.run(r);
  }
  const size_t slot = ctx.workspace_slot(1, a.team.size);
  char* ws = ctx.workspace();
  for (size_t off = 0; off < block; off += slot) {
    const size_t len = std::min(slot, block - off);
    Round r;
    if (root) {
      for (int j : peers(a)) r.out.push_back({j, {ctx.on(a, ws, j), a.send + off, len}});
      if (off == 0 && own.bytes) r.own.push_back(own);
    } else {
      r.in.push_back(a.root);
      r.unpack.push_back({a.recv + off, ws, len});
    }
    rounds.run(r);
  }
}

}  // namespace symcomm::ce
