#include "kiln/base/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln {
namespace {

bool is_half_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }
float bits_to_float(uint32_t bits) { return std::bit_cast<float>(bits); }

// The value of an f16 bit pattern, computed independently of half.h.
double reference_half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000u) ? -magnitude : magnitude;
}

TEST(Half, EveryBitPatternWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = half_bits_to_float(bits);
    const uint16_t back = float_to_half_bits(f);
    if (is_half_nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // NaN stays NaN with its sign and payload, made quiet.
      ASSERT_EQ(back, bits | 0x200u) << std::hex << h;
      continue;
    }
    if ((bits & 0x7fffu) == 0x7c00u) {
      ASSERT_TRUE(std::isinf(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (bits & 0x8000u) != 0) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), reference_half_value(bits)) << std::hex << h;
    }
    ASSERT_EQ(back, bits) << std::hex << h;  // ±0 keep their sign too
  }
}

// Between every two adjacent finite f16 values of the same sign (subnormals included), the exact
// midpoint rounds to the one with an even mantissa, and anything off the midpoint to the nearer.
TEST(Half, RoundsToNearestTiesToEven) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t lo = 0; lo < 0x7bff; ++lo) {
      const auto a = static_cast<uint16_t>(sign | lo);
      const auto b = static_cast<uint16_t>(sign | (lo + 1));
      const float fa = half_bits_to_float(a), fb = half_bits_to_float(b);
      const float mid = (fa + fb) / 2;  // exact: 12 significant bits
      ASSERT_EQ(static_cast<double>(mid), (reference_half_value(a) + reference_half_value(b)) / 2);
      const uint16_t even = (lo & 1u) ? b : a;
      ASSERT_EQ(float_to_half_bits(mid), even) << std::hex << a;
      ASSERT_EQ(float_to_half_bits(std::nextafter(mid, fa)), a) << std::hex << a;
      ASSERT_EQ(float_to_half_bits(std::nextafter(mid, fb)), b) << std::hex << a;
    }
  }
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3c00);      // tie, 1.0 is even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, rounds up to even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
}

TEST(Half, OverflowBecomesInfinity) {
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // the tie above 65504 rounds to inf
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(1e5f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(Half, NanStaysNan) {
  EXPECT_TRUE(is_half_nan(float_to_half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_half_nan(float_to_half_bits(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::quiet_NaN()) & 0x8000u, 0x8000u);
  // Payload only in bits that f16 drops: must not turn into infinity.
  EXPECT_TRUE(is_half_nan(float_to_half_bits(bits_to_float(0x7f800001u))));
  EXPECT_TRUE(is_half_nan(float_to_half_bits(bits_to_float(0xff800001u))));
}

TEST(Half, Subnormals) {
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(-0x1p-24f), 0x8001);
  EXPECT_EQ(float_to_half_bits(0x3ffp-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-14f), 0x0400);    // smallest normal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);    // tie between 0 and 2^-24: 0 is even
  EXPECT_EQ(float_to_half_bits(-0x1p-25f), 0x8000);
  EXPECT_EQ(float_to_half_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half_bits(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 ulps: 2 is even
  EXPECT_EQ(float_to_half_bits(0x1p-30f), 0x0000);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(half_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_bits_to_float(0x83ff), -0x3ffp-24f);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
}

TEST(Bfloat16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = bfloat16_bits_to_float(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    if (is_bf16_nan(bits)) {
      ASSERT_EQ(float_to_bfloat16_bits(f), bits | 0x40u) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_bfloat16_bits(f), bits) << std::hex << b;
    }
  }
}

TEST(Bfloat16, RoundsToNearestTiesToEven) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t lo = 0; lo < 0x7f7f; ++lo) {
      const auto a = static_cast<uint16_t>(sign | lo);
      const auto b = static_cast<uint16_t>(sign | (lo + 1));
      const uint32_t mid_bits = (static_cast<uint32_t>(a) << 16) | 0x8000u;  // exact midpoint
      const uint16_t even = (lo & 1u) ? b : a;
      ASSERT_EQ(float_to_bfloat16_bits(bits_to_float(mid_bits)), even) << std::hex << a;
      ASSERT_EQ(float_to_bfloat16_bits(bits_to_float(mid_bits - 1)), a) << std::hex << a;
      ASSERT_EQ(float_to_bfloat16_bits(bits_to_float(mid_bits + 1)), b) << std::hex << a;
    }
  }
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
}

TEST(Bfloat16, OverflowAndNan) {
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16_bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(float_to_bfloat16_bits(bits_to_float(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  // A NaN whose payload lies only in the dropped bits must stay NaN, not become infinity.
  EXPECT_TRUE(is_bf16_nan(float_to_bfloat16_bits(bits_to_float(0x7f800001u))));
  EXPECT_TRUE(is_bf16_nan(float_to_bfloat16_bits(bits_to_float(0xffffffffu))));
  EXPECT_EQ(float_to_bfloat16_bits(bits_to_float(0xff800001u)) & 0x8000u, 0x8000u);
  EXPECT_EQ(float_to_bfloat16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
}

}  // namespace
}  // namespace kiln
