// The twoshot emulation's reference (twoshot_emulation.cc has the overview): a reduction
// written here, with 16-bit floats through conversions of its own (checked against CUDA's
// by TwoshotEmulation.ReferenceConversions), and the inputs it reduces.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "symcomm/symcomm.h"

namespace symcomm::twoshot::test {

inline uint16_t f16_from(float f) {  // round to nearest even; |f| < 65520
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int ulp = std::max(e - 11, -24);  // 11 significant bits, subnormals in units of 2^-24
  const int q = static_cast<int>(std::nearbyint(std::ldexp(a, -ulp)));
  // Normal: (exponent field ulp + 25, then q - 1024); a carry of q into 2048 and the
  // subnormals (ulp -24, q < 1024) come out of the same sum.
  return static_cast<uint16_t>(sign | (((ulp + 25) << 10) + q - 1024));
}
inline float f16_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const float a = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                           : std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  return h & 0x8000 ? -a : a;
}
inline uint16_t bf16_from(float f) {  // round to nearest even; finite f
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
inline float bf16_value(uint16_t h) {
  const uint32_t x = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

template <typename A>
inline A apply(symcommRedOp_t op, A a, A b) {
  if (op == symcommSum) return static_cast<A>(a + b);
  return op == symcommMin ? std::min(a, b) : std::max(a, b);
}

// out[i] = op over in[0][i], in[1][i], ... in that order: Stored elements are decoded to A
// (16-bit floats to float) and the result encoded once.
template <typename Stored, typename A, typename Dec, typename Enc>
inline void fold(symcommRedOp_t op, const std::vector<const char*>& in, size_t count, char* out,
                 Dec dec, Enc enc) {
  for (size_t i = 0; i < count; ++i) {
    A acc{};
    for (size_t m = 0; m < in.size(); ++m) {
      Stored x;
      std::memcpy(&x, in[m] + i * sizeof x, sizeof x);
      acc = m == 0 ? dec(x) : apply<A>(op, acc, dec(x));
    }
    const Stored y = enc(acc);
    std::memcpy(out + i * sizeof y, &y, sizeof y);
  }
}

template <typename T>
inline void fold_plain(symcommRedOp_t op, const std::vector<const char*>& in, size_t count,
                       char* out) {
  auto same = [](T x) { return x; };
  fold<T, T>(op, in, count, out, same, same);
}

inline void reference(symcommDataType_t type, symcommRedOp_t op,
                      const std::vector<const char*>& in, size_t count, char* out) {
  switch (type) {
    case symcommUint8: return fold_plain<uint8_t>(op, in, count, out);
    case symcommInt32: return fold_plain<int32_t>(op, in, count, out);
    case symcommInt64: return fold_plain<int64_t>(op, in, count, out);
    case symcommFloat32: return fold_plain<float>(op, in, count, out);
    case symcommFloat64: return fold_plain<double>(op, in, count, out);
    case symcommFloat16: return fold<uint16_t, float>(op, in, count, out, f16_value, f16_from);
    case symcommBfloat16: return fold<uint16_t, float>(op, in, count, out, bf16_value, bf16_from);
    default: FAIL() << "no reference for type " << type;
  }
}

// Small integers, or sevenths for floating types: their sums round, so that only the
// team-rank order gives the reference's bits.
inline void fill_input(std::mt19937_64& rng, symcommDataType_t type, char* p, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const int x = static_cast<int>(rng() % 2001) - 1000;
    auto put = [&](auto v) { std::memcpy(p + i * sizeof v, &v, sizeof v); };
    switch (type) {
      case symcommUint8: put(static_cast<uint8_t>(x)); break;
      case symcommInt32: put(static_cast<int32_t>(x)); break;
      case symcommInt64: put(x * (int64_t{1} << 40)); break;  // upper halves too
      case symcommFloat32: put(static_cast<float>(x / 7.0)); break;
      case symcommFloat64: put(x / 7.0); break;
      case symcommFloat16: put(f16_from(static_cast<float>(x / 7.0))); break;
      case symcommBfloat16: put(bf16_from(static_cast<float>(x / 7.0))); break;
      default: FAIL() << "no input for type " << type;
    }
  }
}

}  // namespace symcomm::twoshot::test
