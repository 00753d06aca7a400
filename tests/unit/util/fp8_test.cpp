#include "util/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace spark {

namespace {

// The value of a finite E4M3 code from its definition (OCP FP8: bias 7, subnormals m/8 * 2^-6), in
// double: independent of the bit manipulation under test.
double defined_value(int c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const double mag = e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (c & 0x80) != 0 ? -mag : mag;
}

bool is_nan_code(int c) {
  return (c & 0x7f) == 0x7f;
}

// The code f32_to_fp8_e4m3 must give: the nearest finite code, ties to the even mantissa, beyond 448
// saturated (by brute force over all codes).
int nearest_code(float x) {
  if (std::fabs(x) > 448.0) return std::signbit(x) ? 0xfe : 0x7e;
  int best = -1;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 256; ++c) {
    if (is_nan_code(c) || (std::signbit(x) != ((c & 0x80) != 0))) continue;
    const double err = std::fabs(defined_value(c) - static_cast<double>(x));
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

TEST(Fp8, EveryFiniteCodeDecodesToItsDefinedValueAndRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(code))) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(fp8_e4m3_to_f32(code)), defined_value(c)) << c;
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(code)), code) << c;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
}

TEST(Fp8, RoundsToNearestEvenAndSaturates) {
  // Halfway cases go to the even mantissa, in the normal and the subnormal range.
  EXPECT_EQ(f32_to_fp8_e4m3(1.0f + 1.0f / 16), 0x38);        // between 1 and 1.125: 1
  EXPECT_EQ(f32_to_fp8_e4m3(1.0f + 3.0f / 16), 0x3a);        // between 1.125 and 1.25: 1.25
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.5f, -9)), 0x02);    // 1.5 steps: 2
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(0.5f, -9)), 0x00);    // half the smallest subnormal: 0
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(7.5f, -9)), 0x08);    // rounds up into the smallest normal
  EXPECT_EQ(f32_to_fp8_e4m3(-std::ldexp(15.5f, -6)), 0xa8);  // -1.9375 * 2^-3: carries to -2^-2
  // 464 is halfway between 448 and the NaN code's 480: to 448; anything above saturates.
  EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(464.5f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_TRUE(is_nan_code(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(Fp8, EveryRoundingIsTheNearestCode) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-14, 10);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    float x = std::ldexp(mantissa(rng), exponent(rng));
    if (i % 2 != 0) x = -x;
    ASSERT_EQ(f32_to_fp8_e4m3(x), nearest_code(x)) << x;
    ++checked;
  }
  // Every midpoint between neighbouring finite codes, and a hair either side of it.
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = static_cast<float>((defined_value(c) + defined_value(c + 1)) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) {
      ASSERT_EQ(f32_to_fp8_e4m3(x), nearest_code(x)) << x;
      ASSERT_EQ(f32_to_fp8_e4m3(-x), nearest_code(-x)) << -x;
      checked += 2;
    }
  }
  EXPECT_GT(checked, 200000);
}

}  // namespace spark
