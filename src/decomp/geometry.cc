#include "decomp/geometry.h"

#include <algorithm>

#include "base/error.h"

namespace symcomm {

Range split(int64_t n, int p, int k) {
  const int64_t base = n / p, extra = n % p;
  return Range{k * base + std::min<int64_t>(k, extra), base + (k < extra ? 1 : 0)};
}

void require_initialised(const symcommDecompConfig_t& c) {
  SYMCOMM_REQUIRE(c.magic == SYMCOMM_DECOMP_CONFIG_MAGIC && c.struct_size == sizeof c,
                  symcommInvalidArgument,
                  "config was not initialised with symcommDecompConfigInit (or header and "
                  "library differ)");
}

Geometry::Geometry(const symcommDecompConfig_t& c, int nranks) : config_(c) {
  require_initialised(c);
  for (int a = 0; a < 3; ++a)
    SYMCOMM_REQUIRE(c.gdims[a] >= 1, symcommInvalidArgument, "gdims[%d] is %lld, must be >= 1",
                    a, static_cast<long long>(c.gdims[a]));
  int64_t points = 1;
  for (int a = 0; a < 3; ++a)
    SYMCOMM_REQUIRE(!__builtin_mul_overflow(points, c.gdims[a], &points) && points <= kMaxPoints,
                    symcommInvalidArgument,
                    "a %lld x %lld x %lld grid has more than %lld points (its bytes would "
                    "overflow)", static_cast<long long>(c.gdims[0]),
                    static_cast<long long>(c.gdims[1]), static_cast<long long>(c.gdims[2]),
                    static_cast<long long>(kMaxPoints));
  SYMCOMM_REQUIRE(c.pdims[0] >= 1 && c.pdims[1] >= 1, symcommInvalidArgument,
                  "pdims is %d x %d: both must be >= 1 (or both 0, to autotune the grid)",
                  c.pdims[0], c.pdims[1]);
  SYMCOMM_REQUIRE(static_cast<int64_t>(c.pdims[0]) * c.pdims[1] == nranks, symcommInvalidArgument,
                  "pdims %d x %d does not match the communicator's %d ranks", c.pdims[0],
                  c.pdims[1], nranks);
  SYMCOMM_REQUIRE(c.rank_order == symcommRowMajor || c.rank_order == symcommColumnMajor,
                  symcommInvalidArgument, "rank_order %d is not a symcommRankOrder_t",
                  static_cast<int>(c.rank_order));
  for (int a = 0; a < 3; ++a)
    SYMCOMM_REQUIRE(c.axis_contiguous[a] == 0 || c.axis_contiguous[a] == 1, symcommInvalidArgument,
                    "axis_contiguous[%d] is %d, must be 0 or 1", a, c.axis_contiguous[a]);
  // Every split axis needs a point per part: X/Y/Z pencils split y/x/x over rows and
  // z/z/y over columns.
  const int64_t rows_need = std::min(c.gdims[0], c.gdims[1]);
  const int64_t cols_need = std::min(c.gdims[1], c.gdims[2]);
  SYMCOMM_REQUIRE(rows_need >= c.pdims[0] && cols_need >= c.pdims[1], symcommInvalidArgument,
                  "a %lld x %lld x %lld grid cannot give every rank of a %d x %d process grid a "
                  "point in every pencil", static_cast<long long>(c.gdims[0]),
                  static_cast<long long>(c.gdims[1]), static_cast<long long>(c.gdims[2]),
                  c.pdims[0], c.pdims[1]);
}

int Geometry::row_of(int rank) const {
  return config_.rank_order == symcommRowMajor ? rank / config_.pdims[1] : rank % config_.pdims[0];
}

int Geometry::col_of(int rank) const {
  return config_.rank_order == symcommRowMajor ? rank % config_.pdims[1] : rank / config_.pdims[0];
}

int Geometry::rank_at(int row, int col) const {
  return config_.rank_order == symcommRowMajor ? row * config_.pdims[1] + col
                                               : col * config_.pdims[0] + row;
}

symcommPencilInfo_t Geometry::pencil(int rank, int axis, const int64_t* halo,
                                     const int64_t* padding, const char* prefix) const {
  SYMCOMM_REQUIRE(axis >= 0 && axis < 3, symcommInvalidArgument, "axis %d is not 0, 1 or 2", axis);
  symcommPencilInfo_t p{};
  p.axis = axis;
  // The two split axes: the first over the rows, the second over the columns.
  static const int kSplit[3][2] = {{1, 2}, {0, 2}, {0, 1}};
  for (int a = 0; a < 3; ++a) {
    p.halo[a] = halo ? halo[a] : 0;
    p.padding[a] = padding ? padding[a] : 0;
    SYMCOMM_REQUIRE(p.halo[a] >= 0, symcommInvalidArgument, "%shalo[%d] is %lld: negative",
                    prefix, a, static_cast<long long>(p.halo[a]));
    SYMCOMM_REQUIRE(p.padding[a] >= 0, symcommInvalidArgument,
                    "%spadding[%d] is %lld: negative", prefix, a,
                    static_cast<long long>(p.padding[a]));
    p.lo[a] = 0;
    p.hi[a] = config_.gdims[a];
  }
  const Range r = split(config_.gdims[kSplit[axis][0]], config_.pdims[0], row_of(rank));
  const Range c = split(config_.gdims[kSplit[axis][1]], config_.pdims[1], col_of(rank));
  p.lo[kSplit[axis][0]] = r.start;
  p.hi[kSplit[axis][0]] = r.start + r.count;
  p.lo[kSplit[axis][1]] = c.start;
  p.hi[kSplit[axis][1]] = c.start + c.count;
  for (int i = 0; i < 3; ++i) p.order[i] = config_.axis_contiguous[axis] ? (axis + i) % 3 : i;
  p.size = 1;
  bool fits = true;
  for (int i = 0; i < 3; ++i) {
    const int a = p.order[i];
    int64_t twice_halo = 0;
    fits = fits && !__builtin_mul_overflow(p.halo[a], 2, &twice_halo) &&
           !__builtin_add_overflow(p.hi[a] - p.lo[a], twice_halo, &p.shape[i]) &&
           !__builtin_add_overflow(p.shape[i], p.padding[a], &p.shape[i]) &&
           !__builtin_mul_overflow(p.size, p.shape[i], &p.size) && p.size <= kMaxPoints;
  }
  SYMCOMM_REQUIRE(fits, symcommInvalidArgument,
                  "with %shalo {%lld, %lld, %lld} and %spadding {%lld, %lld, %lld}, the pencil of "
                  "axis %d has more than %lld points (its bytes would overflow)",
                  prefix, static_cast<long long>(p.halo[0]), static_cast<long long>(p.halo[1]),
                  static_cast<long long>(p.halo[2]), prefix,
                  static_cast<long long>(p.padding[0]), static_cast<long long>(p.padding[1]),
                  static_cast<long long>(p.padding[2]), axis, static_cast<long long>(kMaxPoints));
  return p;
}

}  // namespace symcomm
