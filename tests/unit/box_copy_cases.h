// The box copy tests' cases (box_copy_fixture.h has the overview): seeds and random
// numbers, 3D arrays as they lie in memory, boxes, directed and random cases.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "copy/box.h"

namespace box_copy_test {

using symcomm::BoxCopy;
using symcomm::BoxLayout;
using Bytes = std::vector<uint8_t>;
using Rng = std::mt19937_64;

constexpr uint64_t kDefaultSeed = 20261201;
constexpr size_t kGuardBytes = 256;  // poison after each array, a multiple of every element size
inline constexpr size_t kElemSizes[] = {4, 8, 16};

// ---------------------------------------------------------------------------------------
// Seeds and random numbers

inline uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("BOX_COPY_SEED");
    return env && *env ? std::strtoull(env, nullptr, 0) : kDefaultSeed;
  }();
  return seed;
}

// A test's own seed: the base seed and the test's name (not its suite's), so that the host
// and the GPU tests of one name draw the same cases, whichever other tests run.
inline uint64_t test_seed() {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = ::testing::UnitTest::GetInstance()->current_test_info()->name(); *p; ++p)
    h = (h ^ static_cast<uint8_t>(*p)) * 1099511628211ull;
  return base_seed() ^ h;
}

inline int64_t uniform(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
inline bool chance(Rng& rng, int percent) { return uniform(rng, 0, 99) < percent; }

// ---------------------------------------------------------------------------------------
// Arrays, boxes and cases

inline constexpr char kAxis[] = "xyz";

inline std::string triple(const int64_t v[3]) {
  std::ostringstream s;
  s << "(" << v[0] << "," << v[1] << "," << v[2] << ")";
  return s.str();
}

struct Box {
  int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};  // [lo, hi), global indices
  int64_t n(int a) const { return hi[a] - lo[a]; }
  bool contains(const int64_t g[3]) const {
    for (int a = 0; a < 3; ++a)
      if (g[a] < lo[a] || g[a] >= hi[a]) return false;
    return true;
  }
  std::string str() const {
    std::ostringstream s;
    s << "box [" << triple(lo) << ", " << triple(hi) << ")";
    return s.str();
  }
};

// A local 3D array: where its elements lie in its allocation.
struct Array {
  int64_t ext[3] = {1, 1, 1};
  int64_t pad[3] = {1, 1, 1};     // per axis the extent in memory, >= ext
  int order[3] = {0, 1, 2};       // the axes from the fastest in memory to the slowest
  int64_t origin[3] = {0, 0, 0};  // global index of the array's first element per axis
  int64_t slice_extra = 0;        // elements after each slice beyond its whole rows
  int64_t shift = 0;              // elements of the allocation before the array

  int64_t row_pitch() const { return pad[order[0]]; }
  int64_t slice_pitch() const { return pad[order[0]] * pad[order[1]] + slice_extra; }
  int64_t span() const { return slice_pitch() * pad[order[2]]; }
  size_t alloc_bytes(size_t elem) const {
    return static_cast<size_t>(shift + span()) * elem + kGuardBytes;
  }

  // The reference's index of global element g from the array's start: by memory order.
  int64_t index(const int64_t g[3]) const {
    const int64_t c0 = g[order[0]] - origin[order[0]], c1 = g[order[1]] - origin[order[1]],
                  c2 = g[order[2]] - origin[order[2]];
    return c0 + row_pitch() * c1 + slice_pitch() * c2;
  }
  bool contains(const int64_t g[3]) const {
    for (int a = 0; a < 3; ++a)
      if (g[a] < origin[a] || g[a] >= origin[a] + ext[a]) return false;
    return true;
  }
  // What the backend is told (the code under test computes offsets from this).
  BoxLayout layout() const {
    BoxLayout l{};
    l.stride[order[0]] = 1;
    l.stride[order[1]] = row_pitch();
    l.stride[order[2]] = slice_pitch();
    for (int a = 0; a < 3; ++a) l.origin[a] = origin[a];
    return l;
  }
  std::string order_str() const { return {kAxis[order[0]], kAxis[order[1]], kAxis[order[2]]}; }
  std::string str() const {
    std::ostringstream s;
    s << "ext " << triple(ext) << " pad " << triple(pad) << " order " << order_str()
      << " (fastest first) origin " << triple(origin) << " slice_extra " << slice_extra
      << " shift " << shift;
    return s.str();
  }

  // Builders for the directed cases.
  Array& padded(int64_t px, int64_t py, int64_t pz) {
    const int64_t p[3] = {px, py, pz};
    for (int a = 0; a < 3; ++a) pad[a] = ext[a] + p[a];
    return *this;
  }
  Array& at(int64_t ox, int64_t oy, int64_t oz) {
    origin[0] = ox, origin[1] = oy, origin[2] = oz;
    return *this;
  }
  Array& shifted(int64_t elements) { shift = elements; return *this; }
  Array& slice_gap(int64_t elements) { slice_extra = elements; return *this; }
};

// An array of extents x, y, z in memory order `order` ("yxz": y fastest, then x, then z).
inline Array make_array(int64_t x, int64_t y, int64_t z, const char* order) {
  Array a;
  a.ext[0] = a.pad[0] = x;
  a.ext[1] = a.pad[1] = y;
  a.ext[2] = a.pad[2] = z;
  for (int i = 0; i < 3; ++i) {
    const char* p = std::strchr(kAxis, order[i]);
    if (order[i] == '\0' || p == nullptr)
      throw std::logic_error(std::string("test bug: order ") + order);
    a.order[i] = static_cast<int>(p - kAxis);
  }
  return a;
}

inline Box make_box(int64_t x0, int64_t x1, int64_t y0, int64_t y1, int64_t z0, int64_t z1) {
  Box b;
  b.lo[0] = x0, b.hi[0] = x1, b.lo[1] = y0, b.hi[1] = y1, b.lo[2] = z0, b.hi[2] = z1;
  return b;
}

// What copy_box_ce must return on GPUs for a directed case.
enum class CeExpect { Either, Yes, No };

struct Case {
  std::string label;
  Array src, dst;
  Box box;
  size_t elem = 8;
  CeExpect ce = CeExpect::Either;
  std::string str() const {
    std::ostringstream s;
    s << "[" << label << "] elem " << elem << " B, " << box.str() << "\n    src " << src.str()
      << "\n    dst " << dst.str() << "\n    (base seed " << base_seed()
      << "; BOX_COPY_SEED=<n> changes it)";
    return s.str();
  }
};

// A test's own mistakes: bad extents, or a (non-empty) box not inside both arrays.
inline void check_case(const Case& c) {
  for (const Array* x : {&c.src, &c.dst})
    for (int a = 0; a < 3; ++a)
      if (x->ext[a] < 1 || x->pad[a] < x->ext[a] || x->slice_extra < 0 || x->shift < 0)
        throw std::logic_error("test bug: bad array: " + c.str());
  if (c.box.n(0) <= 0 || c.box.n(1) <= 0 || c.box.n(2) <= 0) return;
  const int64_t last[3] = {c.box.hi[0] - 1, c.box.hi[1] - 1, c.box.hi[2] - 1};
  for (const Array* x : {&c.src, &c.dst})
    if (!x->contains(c.box.lo) || !x->contains(last))
      throw std::logic_error("test bug: the box is not inside both arrays: " + c.str());
}

// ---------------------------------------------------------------------------------------
// Random cases

// An extent in [1, max], often 1 or near a multiple of the 32-element tile.
inline int64_t pick_extent(Rng& rng, int64_t max) {
  switch (uniform(rng, 0, 9)) {
    case 0: return 1;
    case 1: return std::min<int64_t>(max, 32 * uniform(rng, 1, 2));
    case 2: return std::clamp<int64_t>(32 * uniform(rng, 1, 2) + uniform(rng, -1, 1), 1, max);
    default: return uniform(rng, 1, max);
  }
}

// A memory order with `fastest` first (any where -1).
inline void pick_order(Rng& rng, int fastest, int order[3]) {
  std::iota(order, order + 3, 0);
  std::shuffle(order, order + 3, rng);
  if (fastest >= 0) std::swap(order[0], *std::find(order, order + 3, fastest));
}

// An array of extents `ext` around the box: its origin puts the box at a random place
// inside; padding, a slice gap and a shifted start at random.
inline Array random_array(Rng& rng, const int64_t ext[3], const Box& b, int fastest) {
  Array a;
  pick_order(rng, fastest, a.order);
  for (int i = 0; i < 3; ++i) {
    a.ext[i] = ext[i];
    a.pad[i] = ext[i] + (chance(rng, 40) ? uniform(rng, 1, 5) : 0);
    a.origin[i] = b.lo[i] - uniform(rng, 0, ext[i] - std::max<int64_t>(b.n(i), 0));
  }
  a.slice_extra = chance(rng, 15) ? uniform(rng, 1, 7) : 0;
  a.shift = chance(rng, 50) ? uniform(rng, 1, 3) : 0;
  return a;
}

// A random case with extents up to `max` per axis. `src_fastest` / `dst_fastest` >= 0 fix
// an array's fastest axis, along which the box then has 2 elements at least (that side is
// contiguous along the box). `empty`: one axis of the box has no element.
inline Case random_case(Rng& rng, int64_t max, size_t elem, int src_fastest = -1,
                        int dst_fastest = -1, bool empty = false) {
  int64_t se[3], de[3];
  Box b;
  for (int a = 0; a < 3; ++a) {
    const int64_t least = a == src_fastest || a == dst_fastest ? 2 : 1;
    se[a] = std::max(least, pick_extent(rng, max));
    de[a] = std::max(least, pick_extent(rng, max));
    const int64_t room = std::min(se[a], de[a]);
    const int64_t n = chance(rng, 25) ? room : chance(rng, 15) ? least : uniform(rng, least, room);
    b.lo[a] = uniform(rng, -40, 40);
    b.hi[a] = b.lo[a] + n;
  }
  if (empty) {
    const int a = static_cast<int>(uniform(rng, 0, 2));
    b.hi[a] = b.lo[a];
  }
  Case c;
  c.label = "random";
  c.elem = elem;
  c.box = b;
  c.src = random_array(rng, se, b, src_fastest);
  c.dst = random_array(rng, de, b, dst_fastest);
  return c;
}

inline size_t random_elem(Rng& rng) { return kElemSizes[uniform(rng, 0, 2)]; }

}  // namespace box_copy_test
