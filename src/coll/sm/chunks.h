// How the sm collectives cut a message into chunks and spread them over channels (see
// sm.cu): the same arithmetic in the kernel, on the host, and in the unit tests.
#pragma once

#include <cstdint>

#include "symcomm/device_comm.h"  // SYMCOMM_HOST_DEVICE

namespace symcomm {
namespace sm {

constexpr int kChannels = 32;  // per pair at most; a call uses channels_for(team size)
constexpr uint64_t kMinChunk = 8 << 10;

// A message of `bytes` in chunks of `size` bytes (the last shorter), `count` of them, spread
// over `channels` channels: chunk i travels on channel i % channels. Both sides of a pair
// derive it from the message size alone.
struct ChunkPlan {
  uint64_t size, count;
  int channels;
};

// One SM stores about 11 GB/s into a peer (H200, NVLink 4), so a rank needs some 40 sending
// blocks to fill its links (SYMCOMM_COLL_SM_BLOCKS): that many channels, shared among its
// peers.
constexpr int kDefaultBlocks = 40;
SYMCOMM_HOST_DEVICE inline int channels_for(int team_size, int blocks = kDefaultBlocks) {
  const int c = team_size > 1 ? (blocks + team_size - 2) / (team_size - 1) : kChannels;
  return c < kChannels ? c : kChannels;
}

// The most channels per pair (at most kChannels) whose grid fits in `resident` blocks: a
// receiver and a sender per peer and channel (reducing receivers are no more), and `self`
// blocks for the own part. 0 where not even one channel fits.
SYMCOMM_HOST_DEVICE inline int channels_that_fit(int team_size, int resident, int self) {
  if (team_size < 2) return kChannels;
  const int c = (resident - self) / (2 * (team_size - 1));
  return c < 0 ? 0 : (c < kChannels ? c : kChannels);
}

// Chunks of at least kMinChunk (fewer flags for mid sizes), at most `slot` bytes (a chunk
// must fit its ring slot, whatever the ring's size), multiples of 16 bytes.
SYMCOMM_HOST_DEVICE inline ChunkPlan chunk_plan(uint64_t bytes, uint64_t slot, int max_channels) {
  if (bytes == 0) return {0, 0, 0};
  uint64_t size = (bytes + max_channels - 1) / max_channels;
  size = (size + 15) / 16 * 16;
  if (size < kMinChunk) size = kMinChunk;
  if (size > slot) size = slot;  // last: a chunk never outgrows its slot
  const uint64_t count = (bytes + size - 1) / size;
  return {size, count, static_cast<int>(count < static_cast<uint64_t>(max_channels) ? count : max_channels)};
}

}  // namespace sm
}  // namespace symcomm
