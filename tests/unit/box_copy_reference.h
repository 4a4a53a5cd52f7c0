// The box copy tests' reference and comparison (box_copy_fixture.h has the overview): the
// source's random bytes, the destination's poison, the copy element by element, what
// differs and where it lies, and a bound on the failing cases a test reports.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "box_copy_cases.h"

namespace box_copy_test {

constexpr int kMaxReported = 8;     // differing elements described per failing case
constexpr int kMaxFailedCases = 5;  // a test stops after this many failing cases

// ---------------------------------------------------------------------------------------
// The reference and the comparison

inline Bytes random_bytes(Rng& rng, size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&b[i], &v, std::min<size_t>(8, n - i));
  }
  return b;
}

inline uint8_t poison_byte(size_t i) { return static_cast<uint8_t>((i * 151 + 0x5b) ^ 0xa5); }

inline Bytes poison(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = poison_byte(i);
  return b;
}

// Copies the box's elements of `src` (the source's whole allocation) into `dst` (the
// destination's), element by element, each array indexed by Array::index.
inline void reference_copy(Bytes& dst, const Array& d, const Bytes& src, const Array& s,
                           const Box& b, size_t elem) {
  for (int64_t z = b.lo[2]; z < b.hi[2]; ++z)
    for (int64_t y = b.lo[1]; y < b.hi[1]; ++y)
      for (int64_t x = b.lo[0]; x < b.hi[0]; ++x) {
        const int64_t g[3] = {x, y, z};
        const auto di = static_cast<size_t>(d.shift + d.index(g)) * elem;
        const auto si = static_cast<size_t>(s.shift + s.index(g)) * elem;
        std::memcpy(&dst[di], &src[si], elem);
      }
}

// Where element e of an array's allocation lies, in words.
inline std::string where(const Array& a, const Box& b, int64_t e) {
  if (e < a.shift) return "before the array's start";
  int64_t l = e - a.shift;
  if (l >= a.span()) return "in the guard after the array";
  const int64_t c2 = l / a.slice_pitch();
  l %= a.slice_pitch();
  if (l >= a.row_pitch() * a.pad[a.order[1]]) return "in the gap after a slice";
  const int64_t c1 = l / a.row_pitch(), c0 = l % a.row_pitch();
  int64_t g[3];
  g[a.order[0]] = a.origin[a.order[0]] + c0;
  g[a.order[1]] = a.origin[a.order[1]] + c1;
  g[a.order[2]] = a.origin[a.order[2]] + c2;
  if (!a.contains(g)) return "in the padding, at " + triple(g);
  return (b.contains(g) ? "in the box at " : "outside the box at ") + triple(g);
}

inline std::string hex(const Bytes& v, size_t off, size_t len) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < len; ++i) {
    s += digits[v[off + i] >> 4];
    s += digits[v[off + i] & 15];
  }
  return s;
}

// The whole allocation of array `a` equals the expected bytes, else which elements differ.
inline ::testing::AssertionResult same_bytes(const Bytes& got, const Bytes& want,
                                             const Array& a, const Box& b, size_t elem) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  if (std::memcmp(got.data(), want.data(), got.size()) == 0) return ::testing::AssertionSuccess();
  int64_t bad = 0;
  std::ostringstream report;
  for (size_t off = 0; off < got.size(); off += elem) {
    const size_t len = std::min(elem, got.size() - off);
    if (std::memcmp(&got[off], &want[off], len) == 0) continue;
    if (bad++ < kMaxReported)
      report << "\n  element " << off / elem << " of the allocation, "
             << where(a, b, static_cast<int64_t>(off / elem)) << ": got " << hex(got, off, len)
             << ", want " << hex(want, off, len);
  }
  return ::testing::AssertionFailure() << bad << " of " << got.size() / elem
                                       << " elements differ (first " << kMaxReported
                                       << " shown):" << report.str();
}

// ---------------------------------------------------------------------------------------
// Running cases

// Stops a loop of cases after kMaxFailedCases failures (one bug fails many cases).
class FailureBudget {
 public:
  bool exhausted(bool ok) {
    if (!ok && ++failed_ == kMaxFailedCases) {
      ADD_FAILURE() << "stopping this test after " << kMaxFailedCases << " failing cases";
      return true;
    }
    return failed_ >= kMaxFailedCases;
  }

 private:
  int failed_ = 0;
};

}  // namespace box_copy_test
