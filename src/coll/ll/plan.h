// What a call of the ll collectives is on one rank (ll.cu has the protocol): the Plan that
// travels by value into the kernel, a rank's area, the shape of each pair's rounds and the
// grid. Host and device code; the host emulation (tests/unit/ll_emulation.cc) makes its
// plans with these same functions.
#pragma once

#include <vector_types.h>  // uint4

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "coll/coll.h"
#include "coll/device/counters.h"
#include "symcomm/device_comm.h"

namespace symcomm {
namespace ll {

constexpr int kMaxTeam = 32;
constexpr int kThreads = 512;                              // per block; packets per slice
constexpr int kMaxBlocks = 16;
constexpr uint64_t kSlice = uint64_t{kThreads} * 8;        // payload per block and round
constexpr uint64_t kRound = kSlice * kMaxBlocks;           // payload per pair and round
constexpr uint64_t kRefresh = uint64_t{1} << 20;           // see "Flag wrap" (ll.cu); a power of 2
constexpr uint64_t kSelfPiece = 64 << 10;                  // own part: a block per piece
constexpr int kMaxSegments = 64;                           // SegmentedPlan's buffers

// What one call moves, by value into the kernel (so that graph capture keeps it).
struct Plan {
  DeviceComm comm;   // the world view: peer windows, error record, abort flag, bound
  const char* send;
  char* recv;
  uint4* packets;    // this rank's area (symmetric): [nranks][2][kMaxBlocks][kThreads]
  uint64_t* seq;     // local: [kMaxBlocks][nranks] rounds done per block and peer
  uint64_t refresh;  // kRefresh (smaller in the emulation, to exercise it)
  int n, me;         // team size, this rank's team rank
  bool reduce;       // receivers reduce red_len bytes from every member
  symcommRedOp_t op;
  int world[kMaxTeam];  // team rank -> world rank
  uint64_t send_off[kMaxTeam], send_len[kMaxTeam];  // bytes for member j: send + send_off[j]
  uint64_t recv_off[kMaxTeam], recv_len[kMaxTeam];  // bytes from member j: recv + recv_off[j]
  uint64_t self_src, self_dst, self_len;            // this rank's own part (copied)
  uint64_t red_len, red_own, red_out;  // reductions: length, own data at send + red_own,
                                       // result at recv + red_out
};

// An all-reduce of several buffers as one message (CollArgs::segments; capi/coll_batch.cc runs
// a group's small all-reduces so): segment k lies at seg_at[k] of the message, an 8-byte
// boundary, so that no packet holds bytes of two segments; the bytes between segments are
// carried as zeros and written nowhere. The rounds are a plain all-reduce's of the whole
// message (red_len); only where a packet's bytes are read and written differs (input_at,
// output_at). A kernel of its own takes it, so that every other call's parameters stay small.
struct SegmentedPlan : Plan {
  int nseg;
  uint64_t seg_at[kMaxSegments];
  uint64_t seg_len[kMaxSegments];
  const char* seg_send[kMaxSegments];
  char* seg_recv[kMaxSegments];
};
static_assert(sizeof(SegmentedPlan) <= 4000, "a segmented plan fits a launch's parameters");

SYMCOMM_HOST_DEVICE inline uint64_t lmin(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Where the packet at byte `off` of this rank's input (output) is, its payload bytes `*nb`
// clipped to the buffer (0 for bytes between segments).
SYMCOMM_HOST_DEVICE inline const char* input_at(const Plan& p, uint64_t off, uint64_t*) {
  return p.send + off;
}
SYMCOMM_HOST_DEVICE inline char* output_at(const Plan& p, uint64_t off, uint64_t*) {
  return p.recv + off;
}
// The segment that holds byte `off` of the message (the last one that starts at or before it).
SYMCOMM_HOST_DEVICE inline int segment_of(const SegmentedPlan& p, uint64_t off) {
  int lo = 0, hi = p.nseg - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.seg_at[mid] <= off) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
SYMCOMM_HOST_DEVICE inline uint64_t clip(const SegmentedPlan& p, int k, uint64_t off, uint64_t nb) {
  const uint64_t in = off - p.seg_at[k];
  return in < p.seg_len[k] ? lmin(nb, p.seg_len[k] - in) : 0;
}
SYMCOMM_HOST_DEVICE inline const char* input_at(const SegmentedPlan& p, uint64_t off,
                                                uint64_t* nb) {
  const int k = segment_of(p, off);
  *nb = clip(p, k, off, *nb);
  return p.seg_send[k] + (off - p.seg_at[k]);
}
SYMCOMM_HOST_DEVICE inline char* output_at(const SegmentedPlan& p, uint64_t off, uint64_t* nb) {
  const int k = segment_of(p, off);
  *nb = clip(p, k, off, *nb);
  return p.seg_recv[k] + (off - p.seg_at[k]);
}

// The rounds of a pair and the blocks it uses, from the bytes each way.
struct Shape {
  uint64_t rounds;
  int blocks;
};

SYMCOMM_HOST_DEVICE inline Shape pair_shape(uint64_t out, uint64_t in) {
  const uint64_t len = out > in ? out : in;
  if (len == 0) return {0, 0};
  const uint64_t rounds = (len + kRound - 1) / kRound;
  return {rounds, rounds > 1 ? kMaxBlocks : static_cast<int>((len + kSlice - 1) / kSlice)};
}

SYMCOMM_HOST_DEVICE inline Shape pair_shape(const Plan& p, int j) {
  return j == p.me ? Shape{0, 0} : pair_shape(p.send_len[j], p.recv_len[j]);
}

SYMCOMM_HOST_DEVICE inline bool active(const Plan& p, int j, uint64_t r, int b) {
  const Shape s = pair_shape(p, j);
  return b < s.blocks && r < s.rounds;
}

// Where block b's slice of round r starts in a message, and its bytes in one of `len`.
SYMCOMM_HOST_DEVICE inline uint64_t slice_offset(uint64_t r, int b) {
  return r * kRound + static_cast<uint64_t>(b) * kSlice;
}

SYMCOMM_HOST_DEVICE inline uint64_t slice_bytes(uint64_t len, uint64_t r, int b) {
  const uint64_t lo = slice_offset(r, b);
  return lo < len ? lmin(kSlice, len - lo) : 0;
}


// Block b's packets of round g from sender world rank s, in `area` (a rank's packets).
SYMCOMM_HOST_DEVICE inline uint4* slot(uint4* area, int s, uint64_t g, int b) {
  const uint64_t half = static_cast<uint64_t>(s) * 2 + g % 2;
  return area + (half * kMaxBlocks + static_cast<uint64_t>(b)) * kThreads;
}

// Rounds block b has done with world rank w.
SYMCOMM_HOST_DEVICE inline uint64_t* seq_of(const Plan& p, int b, int w) {
  return protocol::counter_word<kMaxBlocks>(p.seq, 0, b, p.comm.nranks, w);
}

// The grid of a plan: the most blocks a pair uses, or what the own part wants (0: nothing
// to do).
inline int grid_blocks(const Plan& p) {
  int blocks = 0;
  for (int j = 0; j < p.n; ++j) blocks = std::max(blocks, pair_shape(p, j).blocks);
  const uint64_t own = (p.self_len + kSelfPiece - 1) / kSelfPiece;
  return std::max(blocks, static_cast<int>(std::min<uint64_t>(own, kMaxBlocks)));
}

// Fills `p` (whose comm, packets, seq and refresh are set, the rest zero) for the call `a`:
// what this rank sends to and receives from each member, its own part, or the reduction.
// All-to-all-v trusts that each receiver's counts are its senders' (see symcomm.h).
inline void make_plan(Plan& p, const CollArgs& a) {
  const int n = a.team.size;
  p.n = n;
  p.me = a.me;
  p.op = a.redop;
  p.send = a.send;
  p.recv = a.recv;
  for (int j = 0; j < n; ++j) p.world[j] = a.team.world_of(j);
  const uint64_t block = a.count * a.elem;
  switch (a.op) {
    case CollOp::AllToAllv:
      alltoallv_parts(p, a);
      return;
    case CollOp::Broadcast:  // non-roots send tokens back to the root: "Rounds", ll.cu
      for (int j = 0; j < n; ++j) {
        p.send_len[j] = a.me == a.root && j != a.me ? block : 0;
        p.recv_len[j] = j == a.root && j != a.me ? block : 0;
      }
      p.self_len = a.me == a.root && a.send != a.recv ? block : 0;
      return;
    case CollOp::AllGather:
    case CollOp::AllToAll: {
      const bool all = a.op == CollOp::AllToAll;
      for (int j = 0; j < n; ++j) {
        p.send_off[j] = all ? j * block : 0;
        p.send_len[j] = p.recv_len[j] = j == a.me ? 0 : block;
        p.recv_off[j] = j * block;
      }
      p.self_src = all ? a.me * block : 0;
      p.self_dst = a.me * block;
      p.self_len = a.send == a.recv + p.self_dst ? 0 : block;  // in-place all-gather
      return;
    }
    case CollOp::ReduceScatter:
    case CollOp::AllReduce: {
      const bool scatter = a.op == CollOp::ReduceScatter;
      p.red_own = scatter ? a.me * block : 0;
      if (n == 1) {  // nothing to combine: a copy
        p.self_src = p.red_own;
        p.self_len = a.send + p.red_own == a.recv ? 0 : block;
        return;
      }
      p.reduce = true;
      p.red_len = block;
      for (int j = 0; j < n; ++j) {
        p.send_off[j] = scatter ? j * block : 0;
        p.send_len[j] = p.recv_len[j] = j == a.me ? 0 : block;
      }
      return;
    }
    case CollOp::Reduce:  // not declared (ll's descriptor): refused before a plan
    case CollOp::Gather:
    case CollOp::Scatter:
      return;
  }
}

// A rank's area: the packets, then the counters.
inline size_t packets_bytes(int nranks) {
  return static_cast<size_t>(nranks) * 2 * kMaxBlocks * kThreads * sizeof(uint4);
}
inline size_t seq_bytes(int nranks) {
  return static_cast<size_t>(nranks) * kMaxBlocks * sizeof(uint64_t);
}

// The plan of the call `a` on this rank: the world's view, this rank's `area` (packets_bytes,
// then seq_bytes), a refresh every `refresh` rounds (kRefresh; see "Flag wrap" in ll.cu),
// then make_plan.
inline Plan plan_of(const CollArgs& a, const DeviceComm& world, char* area, uint64_t refresh) {
  Plan p{};
  p.comm = world;
  p.packets = reinterpret_cast<uint4*>(area);
  p.seq = reinterpret_cast<uint64_t*>(area + packets_bytes(world.nranks));
  p.refresh = refresh;
  make_plan(p, a);
  return p;
}

// The plan of the segmented all-reduce `a` (a.segments: at most kMaxSegments, a team of two
// or more; a.count the message's elements, segments_layout()'s bytes).
inline SegmentedPlan segmented_plan_of(const CollArgs& a, const DeviceComm& world, char* area,
                                       uint64_t refresh) {
  SegmentedPlan p{};
  static_cast<Plan&>(p) = plan_of(a, world, area, refresh);
  std::vector<size_t> at;
  segments_layout(*a.segments, &at);
  for (const CollSegment& s : *a.segments) {
    p.seg_at[p.nseg] = at[static_cast<size_t>(p.nseg)];
    p.seg_len[p.nseg] = s.bytes;
    p.seg_send[p.nseg] = s.send;
    p.seg_recv[p.nseg] = s.recv;
    ++p.nseg;
  }
  return p;
}

}  // namespace ll
}  // namespace symcomm
