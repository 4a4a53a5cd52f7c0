// The kernels of each sm collective, as plans (sm/plan.h): one kernel, or two for a large
// broadcast or all-reduce. Host code; the host emulation (tests/unit/sm_emulation.cc) runs
// the plans these functions make.
#pragma once

#include <algorithm>
#include <cstdint>

#include "coll/coll.h"
#include "coll/sm/plan.h"

namespace symcomm {
namespace sm {

// The plan of a collective that only moves data (all-gather, all-to-all(v), broadcast,
// gather, scatter): what this rank sends to and receives from each member, and its own
// part. All-to-all-v trusts that each receiver's counts are its senders' (see symcomm.h).
inline void move_plan(Plan& p, const CollArgs& a) {
  const int n = a.team.size;
  if (a.op == CollOp::AllToAllv) {
    alltoallv_parts(p, a);
    return;
  }
  const uint64_t block = a.count * a.elem;
  if (a.op == CollOp::Broadcast) {
    const bool root = a.me == a.root;
    for (int j = 0; j < n; ++j) {
      p.send_len[j] = root ? block : 0;
      p.recv_len[j] = j == a.root ? block : 0;
    }
    p.self_len = root && a.send != a.recv ? block : 0;
    return;
  }
  if (a.op == CollOp::Gather || a.op == CollOp::Scatter) {
    // Between the root and each other member only: a gather's members send their block to
    // the root, which receives member j's at j * block; a scatter's root sends block j to
    // member j, which receives it at 0. The root copies its own block, unless it is in
    // place already. Nothing else touches a buffer (the non-roots may pass NULL for it).
    const bool root = a.me == a.root, gather = a.op == CollOp::Gather;
    for (int j = 0; j < n; ++j) {
      const bool to_root = !root && j == a.root, from_root = root && j != a.me;
      p.send_off[j] = gather ? 0 : j * block;
      p.send_len[j] = (gather ? to_root : from_root) ? block : 0;
      p.recv_off[j] = gather ? j * block : 0;
      p.recv_len[j] = (gather ? from_root : to_root) ? block : 0;
    }
    p.self_src = gather ? 0 : a.me * block;
    p.self_dst = gather ? a.me * block : 0;
    p.self_len = root && a.send + p.self_src != a.recv + p.self_dst ? block : 0;
    return;
  }
  const bool all = a.op == CollOp::AllToAll;  // else all-gather
  for (int j = 0; j < n; ++j) {
    p.send_off[j] = all ? j * block : 0;
    p.send_len[j] = p.recv_len[j] = block;
    p.recv_off[j] = j * block;
  }
  p.self_src = all ? a.me * block : 0;
  p.self_dst = a.me * block;
  p.self_len = a.send == a.recv + p.self_dst ? 0 : block;  // in-place all-gather
}
// A large broadcast in two kernels, so that the root's links carry the message once, not
// n - 1 times: the root scatters segment j of it to member j (and copies the whole into its
// own recv), then the members other than the root all-gather their segments (the root
// sends its own segment and receives nothing).
constexpr uint64_t kBroadcastSplitMin = 4 << 20;  // at 2 MiB one kernel takes 27.6 us, two 37.8
inline int broadcast_plans(const Plan& base, const CollArgs& a, Plan out[2]) {
  const int n = a.team.size;
  const bool root = a.me == a.root;
  const uint64_t block = a.count * a.elem, seg = (a.count + n - 1) / n * a.elem;
  auto seg_len = [&](int j) {
    const uint64_t lo = std::min<uint64_t>(block, j * seg);
    return std::min<uint64_t>(block, lo + seg) - lo;
  };
  Plan& s = out[0];
  s = base;
  for (int j = 0; j < n; ++j) {
    s.send_off[j] = j * seg;
    s.send_len[j] = root && j != a.me ? seg_len(j) : 0;
    s.recv_off[j] = a.me * seg;
    s.recv_len[j] = !root && j == a.root ? seg_len(a.me) : 0;
  }
  s.self_len = root && a.send != a.recv ? block : 0;
  Plan& g = out[1];
  g = base;
  g.send = a.recv;
  for (int j = 0; j < n; ++j) {
    g.send_off[j] = a.me * seg;
    g.send_len[j] = j == a.me || j == a.root ? 0 : seg_len(a.me);
    g.recv_off[j] = j * seg;
    g.recv_len[j] = root || j == a.me ? 0 : seg_len(j);
  }
  return 2;
}
// The kernels of a collective that only moves data (from `base`): one, or two for a large
// broadcast. Returns how many plans it wrote.
inline int move_plans(const Plan& base, const CollArgs& a, Plan out[2]) {
  if (a.op == CollOp::Broadcast && a.team.size > 2 && a.count * a.elem >= kBroadcastSplitMin)
    return broadcast_plans(base, a, out);
  out[0] = base;
  move_plan(out[0], a);
  return 1;
}
// Makes `p` a reduction: receivers combine `len` bytes from every member (this rank's own
// at send + own) into recv + out.
inline void reduction(Plan& p, uint64_t len, uint64_t own, uint64_t out) {
  p.reduce = true;
  p.red_len = len;
  p.red_own = own;
  p.red_out = out;
  for (int j = 0; j < p.n; ++j) p.recv_len[j] = j == p.me ? 0 : len;
}

// The kernels of a reduction (from `base`, which has the buffers and the area): one for a
// reduce-scatter; for an all-reduce one shot while every rank's whole buffer is small (each
// rank reads n - 1 of them), otherwise two shots: reduce-scatter into this rank's segment of
// recv, then all-gather of the segments (recv + segment is read while other segments are
// written: disjoint). Returns how many plans it wrote (0 for an empty call). One shot moves
// (n - 1) x the buffer in and out of each rank in one kernel; two shots 2 (n - 1) / n x in
// two: one shot up to 768 KiB / (n - 1) per rank (256 KiB on 4 ranks, where two shots took
// 16.6 us at 128 KiB and NCCL 11.1, bench/results/h200x4/coll_d7387de.jsonl).
constexpr uint64_t kOneShotBytes = 768 << 10;
inline int reduce_plans(const Plan& base, const CollArgs& a, Plan out[2]) {
  const int n = a.team.size;
  const uint64_t block = a.count * a.elem;
  if (block == 0) return 0;
  Plan& p = out[0];
  p = base;
  if (a.op == CollOp::Reduce) {
    // One shot into the root, whatever the size: the members send it their whole buffer,
    // which its reducers combine with its own in team-rank order. In place needs no wait:
    // the root sends nothing from the buffer its reducers write.
    const bool root = a.me == a.root;
    for (int j = 0; j < n; ++j) p.send_len[j] = !root && j == a.root ? block : 0;
    if (root) reduction(p, block, 0, 0);
    return 1;
  }
  if (a.op == CollOp::ReduceScatter) {
    for (int j = 0; j < n; ++j) {
      p.send_off[j] = j * block;
      p.send_len[j] = block;
    }
    reduction(p, block, a.me * block, 0);
    return 1;
  }
  // In place, a reducer writes nothing before this rank's senders have read every chunk,
  // and they cannot get past kDepth chunks per channel before the peers' reducers
  // acknowledge: one shot in place only while no channel carries more than that.
  const ChunkPlan cp = pair_plan(base, block);
  const bool in_place = a.send == a.recv && n > 1;
  if (n == 1 || (block <= kOneShotBytes / static_cast<uint64_t>(n - 1) &&
                 (!in_place || cp.count <= static_cast<uint64_t>(kDepth) * cp.channels))) {
    for (int j = 0; j < n; ++j) p.send_len[j] = j == a.me ? 0 : block;
    reduction(p, block, 0, 0);
    p.in_place = in_place;
    return 1;
  }
  const uint64_t seg = (a.count + n - 1) / n * a.elem;
  auto seg_len = [&](int j) {
    const uint64_t lo = std::min<uint64_t>(block, j * seg);
    return std::min<uint64_t>(block, lo + seg) - lo;
  };
  for (int j = 0; j < n; ++j) {
    p.send_off[j] = j * seg;
    p.send_len[j] = j == a.me ? 0 : seg_len(j);
  }
  reduction(p, seg_len(a.me), a.me * seg, a.me * seg);
  Plan& ag = out[1];
  ag = base;
  ag.send = a.recv;
  for (int j = 0; j < n; ++j) {
    ag.send_off[j] = a.me * seg;
    ag.send_len[j] = j == a.me ? 0 : seg_len(a.me);
    ag.recv_off[j] = j * seg;
    ag.recv_len[j] = j == a.me ? 0 : seg_len(j);
  }
  return 2;
}
// All-to-all-v with counts in device memory: one kernel (counts.cuh), which
// reads the counts when it runs, so a graph replays it with the counts of the moment.
inline Plan device_counts_plan(const Plan& base, const CollArgs& a) {
  Plan p = base;
  p.dev_send_counts = reinterpret_cast<const uint64_t*>(a.send_counts);
  p.dev_send_displs = reinterpret_cast<const uint64_t*>(a.send_displs);
  p.dev_recv_counts = reinterpret_cast<uint64_t*>(const_cast<size_t*>(a.recv_counts));
  p.dev_recv_displs = reinterpret_cast<uint64_t*>(const_cast<size_t*>(a.recv_displs));
  p.capacity = a.count;
  p.elem = a.elem;
  return p;
}

}  // namespace sm
}  // namespace symcomm
