// The heap's offset allocator.
#include <gtest/gtest.h>

#include <random>

#include "memory/allocator.h"

namespace symcomm {
namespace {

TEST(Allocator, AlignsAndFitsFirst) {
  Allocator a;
  EXPECT_FALSE(a.allocate(1));  // no capacity yet
  EXPECT_EQ(a.growth_needed(1), 256u);
  a.grow_to(4096);
  EXPECT_EQ(a.allocate(1), 0u);
  EXPECT_EQ(a.allocate(300), 256u);
  EXPECT_EQ(a.allocate(256), 768u);
  EXPECT_EQ(a.used(), 256u + 512u + 256u);
  EXPECT_FALSE(a.allocate(0));
  EXPECT_FALSE(a.allocate(4096));
}

TEST(Allocator, FreeCoalescesAndReports) {
  Allocator a;
  a.grow_to(1024);
  size_t x = *a.allocate(256), y = *a.allocate(256), z = *a.allocate(256);
  EXPECT_EQ(a.check_free(y + 8), Allocator::FreeStatus::Interior);
  EXPECT_EQ(a.check_free(4096), Allocator::FreeStatus::NotInHeap);
  EXPECT_EQ(a.check_free(768), Allocator::FreeStatus::NotAllocated);
  a.free(x);
  a.free(z);
  EXPECT_EQ(a.check_free(x), Allocator::FreeStatus::NotAllocated);
  EXPECT_EQ(a.largest_free(), 512u);  // z merged with the tail
  a.free(y);
  EXPECT_EQ(a.largest_free(), 1024u);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.allocate(1024), 0u);
}

TEST(Allocator, FindsTheLiveAllocationHoldingAnOffset) {
  Allocator a;
  a.grow_to(2048);
  const size_t x = *a.allocate(300), y = *a.allocate(256);  // [0, 512), [512, 768)
  using Range = std::pair<size_t, size_t>;
  EXPECT_EQ(a.live_at(x), Range(x, 512));
  EXPECT_EQ(a.live_at(x + 511), Range(x, 512));  // the rounded-up tail belongs to it
  EXPECT_EQ(a.live_at(y + 8), Range(y, 256));
  EXPECT_FALSE(a.live_at(768));   // free
  EXPECT_FALSE(a.live_at(4096));  // past the capacity
  a.free(x);
  EXPECT_FALSE(a.live_at(x + 8));  // freed
  EXPECT_EQ(a.live_at(y), Range(y, 256));
}

TEST(Allocator, RemembersTheSizeAskedFor) {
  Allocator a;
  a.grow_to(2048);
  const size_t x = *a.allocate(300), y = *a.allocate(256);
  EXPECT_EQ(a.requested(x), 300u);
  EXPECT_EQ(a.requested(y), 256u);
  EXPECT_EQ(a.requested(x + 8), 0u);  // not the start of an allocation
  a.free(x);
  EXPECT_EQ(a.requested(x), 0u);
  EXPECT_EQ(*a.allocate(100), x);  // the range is reused with the new size
  EXPECT_EQ(a.requested(x), 100u);
}

TEST(Allocator, GrowthCountsTheFreeTail) {
  Allocator a;
  a.grow_to(1024);
  a.allocate(256);
  EXPECT_EQ(a.growth_needed(768), 0u);
  EXPECT_EQ(a.growth_needed(1000), 256u);  // 1024 needed, 768 free at the end
  a.grow_to(2048);
  EXPECT_EQ(a.allocate(1000), 256u);  // the tail and the new range merged
}

TEST(Allocator, RandomOperationsNeverOverlap) {
  std::mt19937_64 rng(12345);
  Allocator a;
  a.grow_to(1 << 20);
  std::map<size_t, size_t> live;
  for (int i = 0; i < 20000; ++i) {
    if (!live.empty() && rng() % 2) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      ASSERT_EQ(a.check_free(it->first), Allocator::FreeStatus::Ok);
      a.free(it->first);
      live.erase(it);
      continue;
    }
    size_t bytes = 1 + rng() % 5000;
    auto off = a.allocate(bytes);
    if (!off) continue;
    ASSERT_EQ(*off % Allocator::kAlignment, 0u);
    auto next = live.lower_bound(*off);
    if (next != live.end()) {
      ASSERT_LE(*off + bytes, next->first);
    }
    if (next != live.begin()) {
      ASSERT_LE(std::prev(next)->first + std::prev(next)->second, *off);
    }
    live[*off] = bytes;
  }
  size_t used = 0;
  for (auto& [o, b] : live) used += Allocator::round_up(b, Allocator::kAlignment);
  EXPECT_EQ(a.used(), used);
}

// Larger alignments: the offset is a multiple; the bytes skipped before it stay free (a
// smaller allocation fills them); growth counts what the alignment skips at the tail.
TEST(Allocator, AlignsToWhatIsAsked) {
  Allocator a;
  a.grow_to(1 << 20);
  ASSERT_EQ(a.allocate(100), std::optional<size_t>(0));
  const auto big = a.allocate(1000, 64 << 10);
  ASSERT_TRUE(big);
  EXPECT_EQ(*big, size_t{64} << 10);
  EXPECT_EQ(a.allocate(300), std::optional<size_t>(256));  // in the skipped bytes
  EXPECT_EQ(a.used(), 256u + 1024u + 512u);
  // Below kAlignment the alignment is kAlignment's.
  const auto small = a.allocate(10, 16);
  ASSERT_TRUE(small);
  EXPECT_EQ(*small % Allocator::kAlignment, 0u);
  // 1 MiB of capacity: an aligned 512 KiB fits only at 512 KiB, an aligned 256 KiB then at
  // 256 KiB (inside a range that starts unaligned); no third is left, and growth must cover
  // the tail from an aligned offset.
  EXPECT_EQ(a.allocate(size_t{512} << 10, size_t{512} << 10), std::optional<size_t>(512 << 10));
  EXPECT_EQ(a.allocate(size_t{256} << 10, size_t{256} << 10), std::optional<size_t>(256 << 10));
  EXPECT_FALSE(a.allocate(size_t{256} << 10, size_t{256} << 10));
  EXPECT_EQ(a.growth_needed(size_t{256} << 10, size_t{256} << 10), size_t{256} << 10);
  a.grow_to(size_t{5} << 18);  // 1.25 MiB: the tail from 1 MiB
  EXPECT_EQ(a.allocate(size_t{256} << 10, size_t{256} << 10), std::optional<size_t>(1 << 20));
  // A free range not at an aligned start: growth counts the skip.
  Allocator b;
  b.grow_to(4096);
  ASSERT_EQ(b.allocate(256), std::optional<size_t>(0));  // the tail starts at 256
  EXPECT_EQ(b.growth_needed(100, 8192), 8192u + 256u - 4096u);
}

}  // namespace
}  // namespace symcomm
