// Pencil geometry: splits, process-grid coordinates, and that every pencil's pieces tile
// the global grid exactly, for random shapes, grids, orders, halos and paddings.
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "decomp/geometry.h"

namespace symcomm {
namespace {

symcommDecompConfig_t config(int64_t x, int64_t y, int64_t z, int pr, int pc) {
  symcommDecompConfig_t c{};
  c.struct_size = sizeof c;
  c.magic = SYMCOMM_DECOMP_CONFIG_MAGIC;
  c.gdims[0] = x;
  c.gdims[1] = y;
  c.gdims[2] = z;
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  return c;
}

TEST(DecompGeometry, Splits) {
  EXPECT_EQ(split(10, 3, 0).start, 0);
  EXPECT_EQ(split(10, 3, 0).count, 4);
  EXPECT_EQ(split(10, 3, 1).start, 4);
  EXPECT_EQ(split(10, 3, 1).count, 3);
  EXPECT_EQ(split(10, 3, 2).start, 7);
  EXPECT_EQ(split(10, 3, 2).count, 3);
  EXPECT_EQ(split(8, 4, 3).start, 6);
  EXPECT_EQ(split(8, 4, 3).count, 2);
}

TEST(DecompGeometry, GridCoordinates) {
  auto c = config(8, 8, 8, 2, 4);
  Geometry row(c, 8);
  EXPECT_EQ(row.row_of(5), 1);
  EXPECT_EQ(row.col_of(5), 1);
  c.rank_order = symcommColumnMajor;
  Geometry col(c, 8);
  EXPECT_EQ(col.row_of(5), 1);
  EXPECT_EQ(col.col_of(5), 2);
}

TEST(DecompGeometry, PencilsTileTheGrid) {
  std::mt19937_64 rng(2026);
  for (int trial = 0; trial < 300; ++trial) {
    const int pr = 1 + static_cast<int>(rng() % 4), pc = 1 + static_cast<int>(rng() % 4);
    const int64_t x = pr + static_cast<int64_t>(rng() % 9), y = std::max(pr, pc) + static_cast<int64_t>(rng() % 9),
                  z = pc + static_cast<int64_t>(rng() % 9);
    auto c = config(x, y, z, pr, pc);
    c.rank_order = rng() % 2 ? symcommRowMajor : symcommColumnMajor;
    for (int a = 0; a < 3; ++a) c.axis_contiguous[a] = static_cast<int>(rng() % 2);
    Geometry g(c, pr * pc);
    const int64_t halo[3] = {static_cast<int64_t>(rng() % 2), static_cast<int64_t>(rng() % 3), 0};
    const int64_t pad[3] = {0, static_cast<int64_t>(rng() % 2), static_cast<int64_t>(rng() % 4)};
    for (int axis = 0; axis < 3; ++axis) {
      std::vector<int> owner(static_cast<size_t>(x * y * z), -1);
      for (int r = 0; r < pr * pc; ++r) {
        symcommPencilInfo_t p = g.pencil(r, axis, halo, pad);
        ASSERT_EQ(p.axis, axis);
        EXPECT_EQ(p.lo[axis], 0);
        EXPECT_EQ(p.hi[axis], c.gdims[axis]);  // the pencil's axis is complete
        if (c.axis_contiguous[axis]) {
          EXPECT_EQ(p.order[0], axis);
        }
        int64_t size = 1;
        for (int i = 0; i < 3; ++i) {
          const int ga = p.order[i];
          EXPECT_EQ(p.shape[i], p.hi[ga] - p.lo[ga] + 2 * halo[ga] + pad[ga]);
          size *= p.shape[i];
        }
        EXPECT_EQ(p.size, size);
        for (int64_t k = p.lo[2]; k < p.hi[2]; ++k)
          for (int64_t j = p.lo[1]; j < p.hi[1]; ++j)
            for (int64_t i = p.lo[0]; i < p.hi[0]; ++i) {
              int& o = owner[static_cast<size_t>((k * y + j) * x + i)];
              ASSERT_EQ(o, -1) << "point owned twice";
              o = r;
            }
      }
      for (int o : owner) ASSERT_GE(o, 0) << "point owned by nobody";
    }
  }
}

TEST(DecompGeometry, RejectsBadConfigurations) {
  EXPECT_THROW(Geometry(config(8, 8, 8, 2, 3), 8), Error);   // 6 != 8 ranks
  EXPECT_THROW(Geometry(config(8, 0, 8, 2, 4), 8), Error);   // empty axis
  EXPECT_THROW(Geometry(config(8, 8, 2, 2, 4), 8), Error);   // 2 points of z over 4 columns
  auto c = config(8, 8, 8, 2, 4);
  c.magic = 0;
  EXPECT_THROW(Geometry(c, 8), Error);
  Geometry g(config(8, 8, 8, 2, 4), 8);
  EXPECT_THROW(g.pencil(0, 3, nullptr, nullptr), Error);
  const int64_t bad[3] = {0, -1, 0};
  EXPECT_THROW(g.pencil(0, 0, bad, nullptr), Error);
}

// Expects `f` to throw symcommInvalidArgument with a message holding `part`.
template <typename F>
void expect_refused(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected a refusal saying " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Sizes that overflow are refused, naming what: before, a padding of 2^59 wrapped the
// pencil's size back to the unpadded one, the checks passed and the copies ran off the end.
TEST(DecompGeometry, RefusesSizesThatOverflow) {
  expect_refused([] { Geometry(config(1 << 30, 1 << 30, 1 << 30, 1, 1), 1); }, "more than");
  Geometry g(config(8, 8, 8, 2, 4), 8);
  const int64_t wraps[3] = {int64_t{1} << 59, 0, 0};
  expect_refused([&] { g.pencil(0, 0, nullptr, wraps, "in_"); }, "in_padding {576460752303423488");
  expect_refused([&] { g.pencil(0, 0, wraps, nullptr, "out_"); }, "out_halo {576460752303423488");
  const int64_t max[3] = {INT64_MAX, 0, 0};
  expect_refused([&] { g.pencil(0, 1, max, nullptr); }, "more than");
  expect_refused([&] { g.pencil(0, 2, nullptr, max); }, "more than");
  const int64_t negative[3] = {0, 0, -2};
  expect_refused([&] { g.pencil(0, 0, nullptr, negative, "out_"); }, "out_padding[2] is -2");
  // Rank 0's X pencil is 8 x 4 x 2 points: padding x to kMaxPoints / 8 fits, one more not.
  const int64_t fits[3] = {Geometry::kMaxPoints / 8 - 8, 0, 0};
  EXPECT_EQ(g.pencil(0, 0, nullptr, fits).size, Geometry::kMaxPoints / 8 * 8);
  const int64_t one_more[3] = {Geometry::kMaxPoints / 8 - 7, 0, 0};
  expect_refused([&] { g.pencil(0, 0, nullptr, one_more); }, "more than");
}

}  // namespace
}  // namespace symcomm
