// Helpers shared by the kernel tests: random weights, ISA skipping, error measures.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "gemm/weight.h"
#include "util/half.h"

namespace spark::kernels::test {

// Skips the current test, with the message the test plan asks for, when the CPU lacks `isa`.
#define SPARK_SKIP_UNLESS_CPU_SUPPORTS(isa)                                             \
  do {                                                                                  \
    if (!::spark::kernels::cpu_supports(isa)) {                                         \
      GTEST_SKIP() << "skipped: CPU lacks " << ::spark::kernels::isa_requirements(isa); \
    }                                                                                   \
  } while (0)

// A float weight with its own storage.
struct OwnedFloatWeight {
  std::vector<uint8_t> bytes;
  FloatWeight w;
};

inline OwnedFloatWeight gaussian_weight(FloatDType dtype, int64_t n, int64_t k, std::mt19937& rng,
                                        float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  OwnedFloatWeight o;
  o.bytes.resize(static_cast<size_t>(n * k * float_dtype_size(dtype)));
  for (int64_t i = 0; i < n * k; ++i) {
    const float v = dist(rng);
    if (dtype == FloatDType::kF32) {
      std::memcpy(o.bytes.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = dtype == FloatDType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(o.bytes.data() + i * 2, &h, 2);
    }
  }
  o.w = FloatWeight{dtype, o.bytes.data(), n, k};
  return o;
}

inline std::vector<float> gaussian_vector(size_t count, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

// Σ (a - b)² / Σ b² over the first n columns of m rows with row stride ld.
inline double nmse(const float* a, const float* b, int64_t m, int64_t n, int64_t ld) {
  double err = 0.0, ref = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(a[i * ld + j]) - b[i * ld + j];
      err += d * d;
      ref += static_cast<double>(b[i * ld + j]) * b[i * ld + j];
    }
  }
  return ref > 0.0 ? err / ref : err;
}

// Signal-to-noise ratio in dB of `approx` against `exact`.
inline double snr_db(const std::vector<float>& exact, const std::vector<float>& approx) {
  double sig = 0.0, noise = 0.0;
  for (size_t i = 0; i < exact.size(); ++i) {
    sig += static_cast<double>(exact[i]) * exact[i];
    const double d = static_cast<double>(exact[i]) - approx[i];
    noise += d * d;
  }
  return 10.0 * std::log10(sig / noise);
}

inline const std::vector<WeightFormat>& all_formats() {
  static const std::vector<WeightFormat> formats = {WeightFormat::kF32,  WeightFormat::kBF16,
                                                    WeightFormat::kF16,  WeightFormat::kInt8,
                                                    WeightFormat::kW4A8, WeightFormat::kW4A16};
  return formats;
}

inline bool is_integer_format(WeightFormat f) {
  return f == WeightFormat::kInt8 || f == WeightFormat::kW4A8;
}

}  // namespace spark::kernels::test
