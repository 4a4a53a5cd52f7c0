// The sm collectives' chunk plan: every chunk fits its ring slot, the chunks cover the
// message exactly, and the channels stay within bounds, for ring sizes from the smallest
// (4 KiB slots, as the tests use) to the largest.
#include <gtest/gtest.h>

#include <random>

#include "coll/sm/chunks.h"

using namespace symcomm::sm;

TEST(SmPlan, ChunksFitTheirSlotsAndCoverTheMessage) {
  std::mt19937_64 rng(3);
  for (uint64_t slot : {uint64_t{4096}, uint64_t{8192}, uint64_t{64} << 10, uint64_t{256} << 10})
    for (int n : {2, 3, 4, 8, 32})
      for (int trial = 0; trial < 3000; ++trial) {
        const uint64_t bytes = trial < 64 ? uint64_t{1} << (trial % 31) : rng() % (uint64_t{1} << (rng() % 31));
        SCOPED_TRACE(testing::Message() << "bytes " << bytes << " slot " << slot << " team " << n);
        const ChunkPlan p = chunk_plan(bytes, slot, channels_for(n));
        if (bytes == 0) {
          EXPECT_EQ(p.count, 0u);
          EXPECT_EQ(p.channels, 0);
          continue;
        }
        ASSERT_GT(p.size, 0u);
        EXPECT_LE(p.size, slot);                 // a chunk never overruns its slot
        EXPECT_EQ(p.size % 16, 0u);
        EXPECT_GE(p.count * p.size, bytes);      // covered
        EXPECT_LT((p.count - 1) * p.size, bytes);  // no empty chunk
        EXPECT_GE(p.channels, 1);
        EXPECT_LE(p.channels, channels_for(n));
        EXPECT_LE(static_cast<uint64_t>(p.channels), p.count);
        if (bytes >= kMinChunk && slot >= kMinChunk) {
          EXPECT_GE(p.size, kMinChunk);
        }
      }
}

TEST(SmPlan, ChannelsShareAboutFortyBlocksAmongPeers) {
  EXPECT_EQ(channels_for(2), 32);  // capped at kChannels
  EXPECT_EQ(channels_for(8), 6);   // ceil(40 / 7)
  EXPECT_EQ(channels_for(32), 2);
  EXPECT_EQ(channels_for(1), kChannels);
}

// Channels per pair such that receivers and senders (2 x (n - 1) x channels) and the own
// part's blocks fit in the blocks a GPU holds: an H200 holds 264 of the sm kernel, half of
// one under MPS with 50% of its threads 132.
TEST(SmPlan, ChannelsThatFitTheGpu) {
  EXPECT_EQ(channels_that_fit(8, 264, 8), 18);  // above the 14 that 96 blocks ask for
  EXPECT_EQ(channels_that_fit(8, 132, 8), 8);   // (132 - 8) / 14
  EXPECT_EQ(channels_that_fit(8, 22, 8), 1);    // exactly one channel
  EXPECT_EQ(channels_that_fit(8, 21, 8), 0);    // not even one: no sm collectives
  EXPECT_EQ(channels_that_fit(2, 1000, 8), kChannels);
  EXPECT_EQ(channels_that_fit(1, 0, 8), kChannels);  // no peers
  for (int n = 2; n <= 32; ++n)
    for (int room = 0; room <= 300; ++room) {
      const int c = channels_that_fit(n, room, 8);
      if (c > 0) {
        EXPECT_LE(2 * (n - 1) * c + 8, room) << n << " ranks, room " << room;
      }
      if (c < kChannels) {
        EXPECT_GT(2 * (n - 1) * (c + 1) + 8, room) << n << " ranks, room " << room;
      }
    }
}
