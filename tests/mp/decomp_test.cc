// The decomposition descriptor through the C API: collective creation with agreement,
// grid coordinates, pencil information, bad input.
#include <cstring>

#include "mp.h"
#include "symcomm/decomp.h"

namespace {

symcommDecompConfig_t config_2d(int64_t n) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = n;
  c.gdims[1] = n + 1;  // uneven
  c.gdims[2] = n + 2;
  c.pdims[0] = mp::nranks() % 2 == 0 ? 2 : 1;
  c.pdims[1] = mp::nranks() / c.pdims[0];
  return c;
}

TEST(Decomp, CreateDescribeDestroy) {
  symcommDecompConfig_t c = config_2d(13);
  c.axis_contiguous[1] = 1;
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  int row = -1, col = -1;
  SC_OK(symcommDecompGridCoords(d, &row, &col));
  EXPECT_EQ(row * c.pdims[1] + col, mp::rank());
  // The pieces of every pencil, gathered from every rank, add up to the grid.
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t halo[3] = {1, 0, 2};
    symcommPencilInfo_t p;
    SC_OK(symcommDecompPencilInfo(d, axis, halo, nullptr, &p));
    int64_t owned = (p.hi[0] - p.lo[0]) * (p.hi[1] - p.lo[1]) * (p.hi[2] - p.lo[2]);
    std::vector<int64_t> all(static_cast<size_t>(mp::nranks()));
    SC_OK(symcommHostAllgather(mp::world(), &owned, all.data(), sizeof owned));
    int64_t total = 0;
    for (int64_t v : all) total += v;
    EXPECT_EQ(total, c.gdims[0] * c.gdims[1] * c.gdims[2]) << "axis " << axis;
    EXPECT_EQ(p.order[0], axis == 1 ? 1 : 0);
    EXPECT_EQ(p.shape[0], p.hi[p.order[0]] - p.lo[p.order[0]] + 2 * halo[p.order[0]]);
  }
  SC_FAILS(symcommDecompPencilInfo(d, 5, nullptr, nullptr, nullptr), symcommInvalidArgument);
  SC_OK(symcommDecompDestroy(d));
  SC_FAILS(symcommDecompDestroy(d), symcommInvalidArgument);
}

TEST(Decomp, RanksMustAgree) {
  symcommDecompConfig_t c = config_2d(16);
  if (mp::rank() == 0) c.gdims[2] = 17;
  symcommDecomp_t d = nullptr;
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "same configuration"), nullptr) << symcommGetLastError();
  EXPECT_EQ(d, nullptr);
  c = config_2d(16);
  c.pdims[0] = mp::nranks() + 1;  // wrong on every rank: each says why
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "does not match"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommDecompCreate(mp::world(), nullptr, &d), symcommInvalidArgument);
}

}  // namespace
