// What a call of the sm collectives is on one rank (sm.cu has the protocol): the Plan that
// travels by value into the kernel, the layout of a rank's area, how many channels a pair
// uses and how large a grid is. Host and device code; the host emulation
// (tests/unit/sm_emulation.cc) makes its plans with these same functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "coll/coll.h"
#include "coll/sm/chunks.h"
#include "symcomm/device_comm.h"

namespace symcomm {
namespace sm {

constexpr int kMaxTeam = 32;
constexpr int kDepth = 4;
constexpr int kThreads = 512;
// Blocks that copy this rank's own part (its block of an all-to-all, of an all-gather): one
// per kSelfPiece, at most kSelfBlocks. One block copies some 50 GB/s, so the 1 MiB pieces of
// before made the own part the slowest of a 2 MiB all-to-all on 2 ranks (one block, 1 MiB:
// 23 us where the peers' halves took 12). With counts on the device (sizes unknown on the
// host) kCountsSelfBlocks, each of which also reads the headers.
constexpr int kSelfBlocks = 32;
constexpr uint64_t kSelfPiece = 64 << 10;
constexpr int kCountsSelfBlocks = 8;

// What one call moves, by value into the kernel (so that graph capture keeps it).
struct Plan {
  DeviceComm comm;        // the world view: peer windows, error record, abort flag, bound
  const char* send;
  char* recv;
  // This rank's area (symmetric): [nranks][kChannels] words each, then the rings.
  uint64_t* posted;       // written by sender s at [s]
  uint64_t* acked;        // written by receiver r at [r]
  uint64_t* sent;         // local: chunks sent to r, at [r]
  uint64_t* consumed;     // local: chunks consumed from s, at [s]
  uint64_t* done;         // local, [kChannels]: sender blocks of this channel that finished
  uint64_t* expect;       // local, [kChannels]: what `done` reaches when they all have
  uint64_t* reduced;      // local, [kChannels][kDepth]: reducing blocks done with a chunk
  char* ring;             // [nranks][kChannels][kDepth] slots of `slot` bytes, by sender
  uint64_t slot;
  int n, me;              // team size, this rank's team rank
  int max_channels;       // channels per pair at most: channels_for(n, SYMCOMM_COLL_SM_BLOCKS),
  int max_channels_large; // or for messages from large_from bytes, SYMCOMM_COLL_SM_BLOCKS_LARGE
  uint64_t large_from;
  int channels;           // the most channels any pair of this call uses (grid sizing)
  int self_blocks;        // blocks that copy this rank's own part
  int red_blocks;         // reductions: blocks per channel
  bool reduce;            // receivers reduce (all incoming messages have red_len bytes)
  bool in_place;          // reductions: recv is send, so wait for this rank's senders
  symcommRedOp_t op;
  int world[kMaxTeam];    // team rank -> world rank
  uint64_t send_off[kMaxTeam], send_len[kMaxTeam];  // bytes for member j: send + send_off[j]
  uint64_t recv_off[kMaxTeam], recv_len[kMaxTeam];  // bytes from member j: recv + recv_off[j]
  uint64_t self_src, self_dst, self_len;            // this rank's own part (data movement)
  uint64_t red_len, red_own, red_out;  // reductions: length, own data at send + red_own,
                                       // result at recv + red_out
  // All-to-all-v with counts in device memory (then the lengths and offsets above are not
  // used; see the "Counts on the device" section): elements per member and their send
  // offsets; what each member sent here and where its block starts (both written); recv's
  // capacity in elements; bytes per element.
  const uint64_t* dev_send_counts;
  const uint64_t* dev_send_displs;
  uint64_t* dev_recv_counts;
  uint64_t* dev_recv_displs;
  uint64_t capacity, elem;
  // This rank's area, local: blocks that have read the headers, kCallWeight per call.
  uint64_t* dc_readers;
  int blocks;             // the grid (grid_blocks)
};

// How a message of `len` bytes between two members travels: both sides derive it from len.
// Large messages use more channels (more blocks fill the links better; fewer keep chunks
// large for mid sizes).
SYMCOMM_HOST_DEVICE inline ChunkPlan pair_plan(const Plan& p, uint64_t len) {
  return chunk_plan(len, p.slot, len >= p.large_from ? p.max_channels_large : p.max_channels);
}

// The channels per pair of a call (p.n set): as many as SYMCOMM_COLL_SM_BLOCKS[_LARGE]
// (`blocks`, `blocks_large`) ask for, as long as a grid fits in `room` blocks, the fewest any
// member's GPU holds (so the cap is the same on every member).
inline void set_channels(Plan& p, int blocks, int blocks_large, int room) {
  const int fit = channels_that_fit(p.n, room, kCountsSelfBlocks);
  p.max_channels = std::min(channels_for(p.n, blocks), fit);
  p.max_channels_large = std::min(channels_for(p.n, blocks_large), fit);
}

// Sizes the grid of a plan (filling p.channels and p.self_blocks): receivers, senders, then
// blocks for this rank's own part (one per kSelfPiece, up to kSelfBlocks, and no more than
// leave the grid within `room` blocks, the most the GPU holds at once; at least one). 0:
// nothing to do.
inline int grid_blocks(Plan& p, int room = 1 << 30) {
  if (p.dev_send_counts) {  // lengths unknown here: every channel, every own-part block
    p.channels = p.n > 1 ? std::max(p.max_channels, p.max_channels_large) : 0;
    p.self_blocks = kCountsSelfBlocks;
    return p.blocks = 2 * (p.n - 1) * p.channels + p.self_blocks;
  }
  int ch = 0;
  for (int j = 0; j < p.n; ++j)
    ch = std::max({ch, pair_plan(p, p.send_len[j]).channels,
                   pair_plan(p, p.recv_len[j]).channels});
  p.channels = std::max(ch, pair_plan(p, p.red_len).channels);
  p.self_blocks = static_cast<int>(
      std::min<uint64_t>(kSelfBlocks, (p.self_len + kSelfPiece - 1) / kSelfPiece));
  if (p.channels == 0 && p.self_blocks == 0) return 0;
  // Reductions: blocks per channel so that about as many blocks reduce as move data in the
  // other direction, each taking a slice of at least kMinSlice bytes of every chunk.
  constexpr uint64_t kMinSlice = 2048;
  const uint64_t chunk = std::min(pair_plan(p, p.red_len).size, p.red_len);
  p.red_blocks = static_cast<int>(std::min<uint64_t>(std::max(p.n - 1, 1), std::max<uint64_t>(chunk / kMinSlice, 1)));
  const int receivers = p.reduce ? p.channels * p.red_blocks : (p.n - 1) * p.channels;
  const int others = receivers + (p.n - 1) * p.channels;
  if (p.self_blocks > 1 && others + p.self_blocks > room)
    p.self_blocks = std::max(1, room - others);
  return p.blocks = others + p.self_blocks;
}

// The layout of a rank's area: [nranks][kChannels] words of posted, acked, sent and consumed
// counters, kChannels words each of done and expect, kChannels * kDepth of reduced, nranks
// dc_readers, then the rings.
inline size_t flags_bytes(int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  return (sizeof(uint64_t) * ((4 * n + 2) * kChannels + kChannels * kDepth + 1) + 255) / 256 * 256;
}

inline void point_at_area(Plan& p, char* area, int nranks) {
  const size_t words = static_cast<size_t>(nranks) * kChannels;
  auto* flags = reinterpret_cast<uint64_t*>(area);
  p.posted = flags;
  p.acked = flags + words;
  p.sent = flags + 2 * words;
  p.consumed = flags + 3 * words;
  p.done = flags + 4 * words;
  p.expect = p.done + kChannels;
  p.reduced = p.expect + kChannels;
  p.dc_readers = p.reduced + kChannels * kDepth;
  p.ring = area + flags_bytes(nranks);
}

// Bytes of rings for `nranks` senders with slots of `slot` bytes.
inline uint64_t ring_bytes(int nranks, uint64_t slot) {
  return static_cast<uint64_t>(nranks) * kChannels * kDepth * slot;
}

// The base of every plan of the call `a` (then move_plans, reduce_plans or
// device_counts_plan): the buffers, this rank's area (laid out by point_at_area) with slots
// of `slot` bytes, the team, and the channels (set_channels, from SYMCOMM_COLL_SM_BLOCKS,
// SYMCOMM_COLL_SM_BLOCKS_LARGE and SYMCOMM_COLL_SM_LARGE).
inline Plan base_plan(const CollArgs& a, const DeviceComm& world, char* area, uint64_t slot,
                      int blocks, int blocks_large, int room, uint64_t large_from) {
  Plan p{};
  p.comm = world;
  p.send = a.send;
  p.recv = a.recv;
  point_at_area(p, area, world.nranks);
  p.slot = slot;
  p.n = a.team.size;
  p.me = a.me;
  set_channels(p, blocks, blocks_large, room);
  p.large_from = large_from;
  p.op = a.redop;
  for (int j = 0; j < p.n; ++j) p.world[j] = a.team.world_of(j);
  return p;
}

}  // namespace sm
}  // namespace symcomm
