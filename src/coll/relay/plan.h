// What a broadcast of the relay algorithm is on one rank (relay.cu has the protocol): the
// Plan that travels by value into the kernel, a rank's counters, the pieces, chunks and
// lanes of a call. Host code (the Plan is the kernel's too); the host emulation
// (tests/unit/relay_emulation.cc) makes its plans with these same functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "coll/coll.h"
#include "symcomm/device_comm.h"

namespace symcomm {
namespace relay {

constexpr int kMaxTeam = 32;
constexpr int kThreads = 512;
static_assert(kThreads >= kMaxTeam, "thread m signals and waits for member m");
constexpr int kMaxLanes = 128;
constexpr uint64_t kMinChunk = 32 << 10;  // bytes of a chunk, at least (unless the lane has less)
constexpr int kSelfBlocks = 32;            // the root's own copy: one block per kSelfPiece
constexpr uint64_t kSelfPiece = 64 << 10;
// The root signals each owner as soon as its chunk is stored where a lane has several rounds
// or pieces are larger than this, else once per round (see "Signals" in relay.cu).
constexpr uint64_t kEagerPiece = 1 << 20;

enum Counter { kReady = 0, kData = 1, kCalls = 2, kGot = 3, kPut = 4, kCounters = 5 };

// What one call does, by value into the kernel (graph capture keeps it).
struct Plan {
  DeviceComm comm;   // the world view: error record, abort flag, bound
  int n, me, root;   // team size, this rank's team rank, the root's
  int world[kMaxTeam];
  const char* send;  // the root's
  char* recv;        // this rank's
  char* recv_on[kMaxTeam];       // member m's recv, as mapped here
  uint64_t* flags;               // this rank's [kCounters][kMaxLanes][nranks]
  uint64_t* flags_on[kMaxTeam];  // member m's, as mapped here
  uint64_t len;                  // L
  uint64_t piece;                // P
  uint64_t chunk;                // C
  int lanes;
  int self_blocks;               // the root's blocks after the lanes (0 in place, elsewhere)
};

// The shape of a call (host code): pieces, chunks and lanes into `p` (whose n and len are
// set; n >= 2), from L, n, the parameters and `resident` alone, so that every member derives
// the same. `lane_bytes` (SYMCOMM_COLL_RELAY_LANE_BYTES) and `steps` (SYMCOMM_COLL_RELAY_STEPS)
// are at least 1; no more lanes than `resident`, the fewest blocks any member's GPU holds at
// once (CollContext::fewest_across_ranks).
inline void shape_call(Plan& p, uint64_t max_lanes, uint64_t max_chunk, uint64_t lane_bytes,
                       uint64_t steps, int resident) {
  const uint64_t owners = static_cast<uint64_t>(p.n - 1);
  p.piece = ((p.len + owners - 1) / owners + 15) / 16 * 16;
  // Pieces the root signals chunk by chunk (over kEagerPiece) keep lanes of kMinChunk at
  // least: a fence per owner costs short chunks more than the extra lanes gain.
  if (p.piece > kEagerPiece) lane_bytes = std::max(lane_bytes, kMinChunk);
  max_lanes = std::min<uint64_t>(max_lanes, static_cast<uint64_t>(std::max(resident, 1)));
  const uint64_t lanes = std::min<uint64_t>(max_lanes, (p.piece + lane_bytes - 1) / lane_bytes);
  p.lanes = static_cast<int>(std::max<uint64_t>(lanes, 1));
  // Chunks are at least kMinChunk, unless a lane's whole share of the piece is less: then a
  // lane moves its share as one chunk (more lanes of less each, where lane_bytes asks for
  // them, rather than fewer lanes of kMinChunk).
  const uint64_t share = (p.piece + p.lanes - 1) / p.lanes;
  const uint64_t per =
      std::max(std::min(kMinChunk, share), (p.piece + p.lanes * steps - 1) / (p.lanes * steps));
  p.chunk = std::max<uint64_t>(16, std::min(max_chunk / 16 * 16, (per + 15) / 16 * 16));
  // No lane without a chunk of piece 0 (16-byte chunks can be fewer than the lanes).
  p.lanes = static_cast<int>(std::min<uint64_t>(p.lanes, (p.piece + p.chunk - 1) / p.chunk));
}

// The root's blocks that copy its send into its own recv (`copies`: this rank is the root,
// not in place) into p.self_blocks: one per kSelfPiece, up to kSelfBlocks, and no more than
// the GPU holds beside the lanes (`resident`: the grid must be resident at once). The lanes
// are the same on every member; a root that asked for more would refuse a call its peers
// had already launched. True where none are left: the copy engines then copy before the
// kernel.
inline bool place_own_copy(Plan& p, bool copies, int resident) {
  const uint64_t want = std::min<uint64_t>(kSelfBlocks, (p.len + kSelfPiece - 1) / kSelfPiece);
  const uint64_t spare = static_cast<uint64_t>(std::max(resident - p.lanes, 0));
  p.self_blocks = copies ? static_cast<int>(std::min(want, spare)) : 0;
  return copies && p.self_blocks == 0;
}

// A rank's area: the counters, [kCounters][kMaxLanes][nranks] words.
inline size_t counters_bytes(int nranks) {
  return size_t{kCounters} * kMaxLanes * static_cast<size_t>(nranks) * sizeof(uint64_t);
}

// The plan of the broadcast `a` (a team of 2 or more, len > 0) on this rank: the world's
// view, this rank's `area` (counters_bytes), the team, every member's recv and counters as
// mapped here (on(q, j) is this rank's address q on member j, as CollContext::on), the
// shape (shape_call, with `max_lanes`, `max_chunk`, `lane_bytes` and `steps`) and the
// root's own copy (place_own_copy), within `resident` blocks. True where that copy is left
// to the copy engines, before the kernel.
template <typename On>
bool make_plan(Plan& p, const CollArgs& a, const DeviceComm& world, char* area,
               uint64_t max_lanes, uint64_t max_chunk, uint64_t lane_bytes, uint64_t steps,
               int resident, On on) {
  p.comm = world;
  p.n = a.team.size;
  p.me = a.me;
  p.root = a.root;
  p.send = a.send;
  p.recv = a.recv;
  p.len = a.count * a.elem;
  p.flags = reinterpret_cast<uint64_t*>(area);
  for (int j = 0; j < p.n; ++j) {
    p.world[j] = a.team.world_of(j);
    p.recv_on[j] = j == a.me ? a.recv : on(a.recv, j);
    p.flags_on[j] = reinterpret_cast<uint64_t*>(on(p.flags, j));
  }
  shape_call(p, max_lanes, max_chunk, lane_bytes, steps, resident);
  return place_own_copy(p, a.me == a.root && a.send != a.recv, resident);
}

}  // namespace relay
}  // namespace symcomm
