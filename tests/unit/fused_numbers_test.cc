// The fused layer's float16 and bfloat16 conversions on the host (fused/numbers.h), which the
// CPU reference computes with: exact for what the types hold, round to nearest even
// between, subnormals, infinities and NaN.
#include "fused/numbers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace symcomm::fused {
namespace {

TEST(FusedNumbers, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(float_to_half(f), h) << std::hex << h << " as " << f;
  }
}

TEST(FusedNumbers, EveryBfloat16RoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), h) << std::hex << h << " as " << f;
  }
}

TEST(FusedNumbers, HalfValuesAndRounding) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);     // the largest
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);     // rounds to infinity
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  // Halfway between 1 and the next half (1 + 2^-10): to the even one, 1.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // Halfway between 1 + 2^-10 and 1 + 2^-9: to the even one, 1 + 2^-9.
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above halfway rounds up.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
}

TEST(FusedNumbers, Bfloat16ValuesAndRounding) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // halfway: to even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // halfway: to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(FusedNumbers, LoadAndStoreByType) {
  float f32[2] = {0, 0};
  uint16_t h16[2] = {0, 0};
  store(symcommFloat32, f32, 1, 2.5f);
  store(symcommFloat16, h16, 1, 2.5f);
  EXPECT_EQ(load(symcommFloat32, f32, 1), 2.5f);
  EXPECT_EQ(load(symcommFloat16, h16, 1), 2.5f);
  store(symcommBfloat16, h16, 0, -0.375f);
  EXPECT_EQ(load(symcommBfloat16, h16, 0), -0.375f);
}

}  // namespace
}  // namespace symcomm::fused
