// Scalar conversions between f32 and FP8 E4M3 (the OCP "e4m3fn" layout that vLLM's and PyTorch's
// float8_e4m3fn use): 1 sign, 4 exponent (bias 7) and 3 mantissa bits, no infinities, 0x7f / 0xff NaN,
// largest finite 448, subnormals m * 2^-9. The KV cache stores K and V this way with
// `--kv-cache-dtype fp8`: one byte per element, a quarter of f32.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace spark {

// Round to nearest, ties to even; beyond the largest finite value (and for infinities) saturate to
// +-448 rather than overflow to NaN, so a large K or V element stays large.
inline uint8_t f32_to_fp8_e4m3(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7fu;  // NaN
  // Above 464 (halfway between 448 and the NaN code's 480) a value would round to 480: saturate.
  if (mag > 0x43e80000u) return sign | 0x7eu;
  if (mag >= 0x3c800000u) {  // 2^-6 and up: normal. Drop 20 mantissa bits with ties to even.
    const uint32_t r = (mag + 0x7ffffu + ((mag >> 20) & 1u)) >> 20;
    return sign | static_cast<uint8_t>(r - ((127u - 7u) << 3));  // rebias; a carry gives the next exponent
  }
  // Subnormal range: |f| * 512 < 8 is exact, and adding then subtracting 2^23 rounds it to an integer
  // with ties to even (the default rounding mode; the build never uses -ffast-math, which would fold it);
  // 8 comes out as 0x08, the smallest normal.
  const float t = std::bit_cast<float>(mag) * 512.0f + 8388608.0f;
  return sign | static_cast<uint8_t>(static_cast<int>(t - 8388608.0f));
}

constexpr float fp8_e4m3_to_f32(uint8_t c) {
  const uint32_t e = (c >> 3) & 0xfu, m = c & 7u;
  float mag;
  if ((c & 0x7fu) == 0x7fu) {
    mag = std::bit_cast<float>(0x7fc00000u);  // NaN
  } else if (e == 0) {
    mag = static_cast<float>(m) * (1.0f / 512.0f);
  } else {
    mag = std::bit_cast<float>(((e + 120u) << 23) | (m << 20));
  }
  return (c & 0x80u) != 0 ? -mag : mag;
}

// Every code's value, for code that widens one element at a time (a load instead of the branches above).
inline constexpr std::array<float, 256> kFp8E4M3Values = [] {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
  return t;
}();

}  // namespace spark
