// The sm collectives' chunk plan: every chunk fits its ring slot, the chunks cover the
// message exactly, and the channels stay within bounds, for ring sizes from the smallest
// (4 KiB slots, as the tests use) to the largest.
#include <gtest/gtest.h>

#include <random>

#include "coll/sm_plan.h"

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
        EXPECT_LE(p.size, slot);                 // the bug this test was written for
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
