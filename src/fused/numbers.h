// Elements of the fused layer's types on the host: float16 and bfloat16 to and from float
// (round to nearest even), and loads and stores by type, for the CPU reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "symcomm/symcomm.h"

namespace symcomm::fused {

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, frac = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (frac << 13);  // inf, nan
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (frac << 13);
  } else if (frac == 0) {
    u = sign;
  } else {  // subnormal: frac * 2^-24
    const float v = static_cast<float>(frac) * 5.9604644775390625e-8f;
    std::memcpy(&u, &v, sizeof u);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  const float a = std::fabs(f);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 6.103515625e-5f) {  // subnormal or zero: units of 2^-24, nearest even
    const float units = a * 16777216.0f;
    float r = std::nearbyint(units);  // the default rounding: to nearest even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  uint32_t mant = u & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((u >> 23) & 0xffu) - 127 + 15;
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exp
  return static_cast<uint16_t>(sign | half);
}

inline float load(symcommDataType_t type, const void* base, size_t i) {
  switch (type) {
    case symcommFloat32: return static_cast<const float*>(base)[i];
    case symcommFloat16: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case symcommBfloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return 0.0f;
  }
}

inline void store(symcommDataType_t type, void* base, size_t i, float v) {
  switch (type) {
    case symcommFloat32: static_cast<float*>(base)[i] = v; break;
    case symcommFloat16: static_cast<uint16_t*>(base)[i] = float_to_half(v); break;
    case symcommBfloat16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
    default: break;
  }
}

}  // namespace symcomm::fused
