// append_linear_copy: a linear copy as the box copies the batched kernels take, checked by
// walking every box the way the copy kernels do (rows of x, each at its layout offset).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "copy/box.h"

namespace symcomm {
namespace {

// Runs the box copies on the host, element by element, as the copy kernels would.
void run(const std::vector<BoxCopy>& copies, size_t elem) {
  for (const BoxCopy& c : copies)
    for (int64_t z = c.lo[2]; z < c.hi[2]; ++z)
      for (int64_t y = c.lo[1]; y < c.hi[1]; ++y)
        for (int64_t x = c.lo[0]; x < c.hi[0]; ++x)
          std::memcpy(static_cast<char*>(c.dst) + c.dl.offset(x, y, z) * static_cast<int64_t>(elem),
                      static_cast<const char*>(c.src) + c.sl.offset(x, y, z) * static_cast<int64_t>(elem),
                      elem);
}

TEST(LinearCopy, RowsThenTheRestCoverEveryElementOnce) {
  for (size_t elem : {size_t{4}, size_t{8}, size_t{16}})
    for (int64_t n : {int64_t{0}, int64_t{1}, kLinearRow - 1, kLinearRow, kLinearRow + 1,
                      3 * kLinearRow, 5 * kLinearRow + 77, kLinearRow * kLinearRows + 5}) {
      SCOPED_TRACE("elem " + std::to_string(elem) + " n " + std::to_string(n));
      std::vector<unsigned char> src(static_cast<size_t>(n) * elem), dst(src.size() + 64, 0xAB);
      std::iota(src.begin(), src.end(), static_cast<unsigned char>(1));
      std::vector<BoxCopy> copies;
      append_linear_copy(copies, dst.data(), src.data(), n, elem, 5);
      EXPECT_LE(copies.size(), 2u);  // full rows, then the rest
      for (const BoxCopy& c : copies) {
        EXPECT_EQ(c.peer, 5);
        EXPECT_LE(c.hi[0] - c.lo[0], linear_row(n, elem));
      }
      run(copies, elem);
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
      for (size_t i = src.size(); i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "past the end";
    }
}

// Long runs keep the longest rows; shorter ones get shorter rows, down to one pass of a
// warp (2 KiB), so that a copy kernel still has many rows to spread over its warps.
TEST(LinearCopy, ShortRunsGetShorterRows) {
  EXPECT_EQ(linear_row(kLinearRow * kLinearRows, 8), kLinearRow);
  EXPECT_EQ(linear_row(int64_t{1} << 40, 4), kLinearRow);
  EXPECT_EQ(linear_row(kLinearRow * kLinearRows - 1, 8), kLinearRow / 2);
  EXPECT_EQ(linear_row(kLinearRow / 2 * kLinearRows, 8), kLinearRow / 2);
  EXPECT_EQ(linear_row(65536, 8), 256);  // 512 KiB of 8-byte elements: 256 rows of 2 KiB
  EXPECT_EQ(linear_row(65536, 4), 512);
  EXPECT_EQ(linear_row(65536, 16), 128);
  EXPECT_EQ(linear_row(1, 8), 256);
  EXPECT_EQ(linear_row(1, 4096), 1);  // elements wider than the shortest row: one per row
  EXPECT_EQ(linear_row(1 << 30, 4096), kLinearRow);
  for (size_t elem : {size_t{4}, size_t{8}, size_t{16}})
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20, int64_t{1} << 23}) {
      const int64_t row = linear_row(n, elem);
      EXPECT_EQ(row & (row - 1), 0) << n;  // a power of two: whole 16-byte vectors per row
      EXPECT_GE(row * static_cast<int64_t>(elem), kLinearRowBytes) << n;
      EXPECT_TRUE(n / row >= kLinearRows || row * static_cast<int64_t>(elem) == kLinearRowBytes)
          << n;
    }
}

}  // namespace
}  // namespace symcomm
