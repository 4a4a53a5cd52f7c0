// The cut of a message into a send/recv lane's ways (coll/p2p_parts.h): the parts cover the
// message exactly, in order, each but the last of whole 256-byte units, none after an empty
// one; and the chunks each part takes (at least one, for the header).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "coll/p2p_parts.h"

namespace symcomm {
namespace {

void check_cut(uint64_t total, int ways) {
  SCOPED_TRACE(::testing::Message() << total << " bytes over " << ways << " ways");
  uint64_t at = 0;
  bool ended = false;
  for (int w = 0; w < ways; ++w) {
    const P2pPart p = p2p_part(total, ways, w);
    ASSERT_EQ(p.at, at) << "way " << w;
    if (ended) ASSERT_EQ(p.bytes, 0u) << "way " << w << " after an empty or short one";
    if (p.at + p.bytes < total) ASSERT_EQ(p.bytes % 256, 0u) << "way " << w;
    if (p.bytes % 256 != 0 || p.bytes == 0) ended = true;
    at += p.bytes;
  }
  ASSERT_EQ(at, total);
  // Equal parts: no way carries more than a 256-byte unit over its share.
  ASSERT_LE(p2p_part(total, ways, 0).bytes, (total + ways - 1) / ways + 255);
}

TEST(P2pParts, CoverTheMessageInOrder) {
  for (uint64_t total : {0ull, 1ull, 255ull, 256ull, 257ull, 2047ull, 2048ull, 2049ull,
                         65472ull, 8ull * 4 * 65472 + 4099, 1ull << 30})
    for (int ways = 1; ways <= 8; ++ways) check_cut(total, ways);
  std::mt19937_64 rng(20261129);
  for (int i = 0; i < 2000; ++i) check_cut(rng() % (64ull << 20), 1 + static_cast<int>(rng() % 8));
}

TEST(P2pParts, SmallMessagesLeaveTheLastWaysEmpty) {
  // 257 bytes over 8 ways: 256 on way 0, 1 on way 1, nothing on the other 6.
  EXPECT_EQ(p2p_part(257, 8, 0).bytes, 256u);
  EXPECT_EQ(p2p_part(257, 8, 1).bytes, 1u);
  for (int w = 2; w < 8; ++w) EXPECT_EQ(p2p_part(257, 8, w).bytes, 0u);
  for (int w = 0; w < 8; ++w) EXPECT_EQ(p2p_part(0, 8, w).bytes, 0u);
}

TEST(P2pParts, EveryPartTakesAtLeastOneChunk) {
  EXPECT_EQ(p2p_chunks(0, 65472), 1u);  // the header alone
  EXPECT_EQ(p2p_chunks(1, 65472), 1u);
  EXPECT_EQ(p2p_chunks(65472, 65472), 1u);
  EXPECT_EQ(p2p_chunks(65473, 65472), 2u);
  EXPECT_EQ(p2p_chunks(4 * 65472 + 1, 65472), 5u);
}

}  // namespace
}  // namespace symcomm
