// The quantizers (weight quality, padding, errors), the activation quantizer, the embedding row lookup
// and the packed-tensor serialization.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gemm/activations.h"
#include "gemm/dispatch.h"
#include "gemm/gemm_isa.h"
#include "kernel_test_util.h"
#include "spark/error.h"

namespace spark::kernels {

namespace {

using test::all_formats;

std::vector<float> dequantize_all(const QuantizedWeight& w) {
  std::vector<float> out(static_cast<size_t>(w.n * w.k));
  for (int64_t r = 0; r < w.n; ++r) dequantize_row(w, r, out.data() + r * w.k);
  return out;
}

// Weight SNR of each format on gaussian weights (Spark-like K = 2048), with the floor each must clear.
// Measured on this generator: f16 ~73.9 dB, bf16 ~52.2, int8 ~40.5, w4a16 ~20.6, w4a8 ~20.2 (the best uniform
// 16-level quantizer of a gaussian: 20.2).
TEST(Quantize, WeightSnrAboveFloor) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const int64_t n = 64, k = 2048;
  auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng, 0.02f);
  const std::vector<float> exact(static_cast<const float*>(src.w.data),
                                 static_cast<const float*>(src.w.data) + n * k);
  const std::pair<WeightFormat, double> floors[] = {{WeightFormat::kF16, 70.0},
                                                    {WeightFormat::kBF16, 50.0},
                                                    {WeightFormat::kInt8, 39.0},
                                                    {WeightFormat::kW4A16, 20.0},
                                                    {WeightFormat::kW4A8, 19.5}};
  for (const auto& [format, floor_db] : floors) {
    const QuantizedWeight w = quantize_weight(src.w, format, pool);
    const double snr = test::snr_db(exact, dequantize_all(w));
    RecordProperty(std::string("snr_db_") + weight_format_name(format), std::to_string(snr));
    std::printf("[ snr      ] %-6s %.2f dB (floor %.1f), %.3f bits/weight\n", weight_format_name(format), snr,
                floor_db, bits_per_weight(format, n, k));
    EXPECT_GE(snr, floor_db) << weight_format_name(format);
  }
}

// The clipping search must not lose to the plain min/max (w4a16) or max/-8 (w4a8) choice it starts from:
// compared here on heavy-tailed weights, where clipping matters most.
TEST(Quantize, FourBitSearchBeatsPlainRounding) {
  std::mt19937 rng(5);
  ThreadPool pool(1);
  const int64_t n = 32, k = 512;
  std::student_t_distribution<float> dist(3.0f);
  std::vector<float> wv(static_cast<size_t>(n * k));
  for (float& v : wv) v = 0.01f * dist(rng);
  const FloatWeight src{FloatDType::kF32, wv.data(), n, k};
  // Plain asymmetric min/max rounding, computed here independently of the quantizer.
  double plain_err = 0.0, sig = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < k / 128; ++g) {
      const float* v = wv.data() + r * k + g * 128;
      float lo = v[0], hi = v[0];
      for (int i = 0; i < 128; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
      const float s = (hi - lo) / 15.0f;
      for (int i = 0; i < 128; ++i) {
        const float q = std::clamp(std::nearbyint((v[i] - lo) / s), 0.0f, 15.0f);
        plain_err += std::pow(v[i] - (q * s + lo), 2.0);
        sig += static_cast<double>(v[i]) * v[i];
      }
    }
  }
  const QuantizedWeight w = quantize_weight(src, WeightFormat::kW4A16, pool);
  const double searched = test::snr_db(wv, dequantize_all(w));
  EXPECT_GT(searched, 10.0 * std::log10(sig / plain_err) + 0.3);
}

TEST(Quantize, PaddingAndShapes) {
  std::mt19937 rng(9);
  ThreadPool pool(3);
  for (WeightFormat format : all_formats()) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {17, 129}, {31, 64}, {16, 300}}) {
      auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng);
      const QuantizedWeight w = quantize_weight(src.w, format, pool);
      EXPECT_EQ(w.n, n);
      EXPECT_EQ(w.k, k);
      if (is_float_format(format)) {
        EXPECT_EQ(w.n_pad, n);
        EXPECT_EQ(w.k_pad, k);
      } else {
        EXPECT_EQ(w.n_pad % kBlockRows, 0);
        EXPECT_EQ(w.k_pad % (format == WeightFormat::kInt8 ? kInt8KAlign : kGroupSize), 0);
        EXPECT_GE(w.n_pad, n);
        EXPECT_LT(w.n_pad - n, kBlockRows);
      }
      EXPECT_EQ(w.bytes() * 8, static_cast<size_t>(std::llround(bits_per_weight(format, n, k) * n * k)));
    }
  }
}

TEST(Quantize, ZeroWeightsGiveZeroOutput) {
  ThreadPool pool(2);
  std::vector<float> zeros(static_cast<size_t>(20 * 200), 0.0f);
  std::vector<float> x(static_cast<size_t>(3 * 200), 1.5f);
  for (WeightFormat format : all_formats()) {
    const QuantizedWeight w =
        quantize_weight(FloatWeight{FloatDType::kF32, zeros.data(), 20, 200}, format, pool);
    std::vector<float> y(60, NAN);
    gemm(x.data(), 3, w, y.data(), 20, pool);
    for (float v : y) EXPECT_EQ(v, 0.0f) << weight_format_name(format);
  }
}

TEST(Quantize, RejectsNonFiniteAndEmptyWeights) {
  ThreadPool pool(2);
  std::vector<float> wv(64 * 128, 0.5f);
  wv[777] = NAN;
  for (WeightFormat format : {WeightFormat::kInt8, WeightFormat::kW4A8, WeightFormat::kW4A16}) {
    EXPECT_THROW(quantize_weight(FloatWeight{FloatDType::kF32, wv.data(), 64, 128}, format, pool), Error);
    EXPECT_THROW(quantize_weight(FloatWeight{FloatDType::kF32, wv.data(), 0, 128}, format, pool), Error);
  }
  wv[777] = 1e30f;  // finite, but its 4-bit group scale cannot be an f16
  EXPECT_THROW(quantize_weight(FloatWeight{FloatDType::kF32, wv.data(), 64, 128}, WeightFormat::kW4A8, pool),
               Error);
  EXPECT_THROW(parse_weight_format("q4_k"), Error);
  for (WeightFormat f : all_formats()) EXPECT_EQ(parse_weight_format(weight_format_name(f)), f);
}

TEST(Activations, PerTokenSymmetricRounding) {
  const float x[2][5] = {{1.0f, -0.5f, 0.0f, 0.25f, -1.0f}, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f}};
  const QuantizedActivations a = quantize_activations(&x[0][0], 2, 5, 8, 0, false, nullptr);
  EXPECT_FLOAT_EQ(a.scale[0], 1.0f / 127.0f);
  // 127 · -0.5 = -63.5 rounds half to even: -64; 127 · 0.25 = 31.75 -> 32.
  const int8_t want0[8] = {127, -64, 0, 32, -127, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.q[i], want0[i]) << i;
  EXPECT_EQ(a.scale[1], 0.0f);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.q[8 + i], 0);
  const QuantizedActivations b = quantize_activations(&x[0][0], 1, 5, 128, 1, true, nullptr);
  EXPECT_EQ(static_cast<uint8_t>(b.q[0]), 255);  // 127 + 128
  EXPECT_EQ(static_cast<uint8_t>(b.q[5]), 128);  // padding is a zero activation
  EXPECT_EQ(b.group_sums[0], 127 - 64 + 32 - 127);
}

// A non-finite activation (a diverged model) must not be undefined behaviour: the row still quantizes to
// values in range (the sanitizer build checks the conversions).
TEST(Activations, NonFiniteInputsStayDefined) {
  const float x[4] = {INFINITY, 1.0f, NAN, -INFINITY};
  const QuantizedActivations a = quantize_activations(x, 1, 4, 64, 1, false, nullptr);
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(a.q[i], -127);
    EXPECT_LE(a.q[i], 127);
  }
}

// The AVX2 and AVX-512 row quantizers must give the scalar one's bytes, scale and group sums exactly (the
// integer GEMMs are bit-exact against the reference only if they quantize alike): rows with ties at .5,
// zeros, non-finite values and lengths off the 8- and 16-lane and 128-group boundaries.
void expect_row_quantizer_matches_scalar(QuantizeRowFn row_fn) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t k : {1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 200, 2048, 6656}) {
    for (int variant = 0; variant < 5; ++variant) {
      const int64_t m = 3, k_pad = (k + 127) / 128 * 128, groups = k_pad / 128;
      std::vector<float> x(static_cast<size_t>(m * k));
      for (float& v : x) v = normal(rng);
      if (variant == 1) {
        // Multiples of 1/254 of the row maximum 2: x · 127 / 2 lands on halves, which round to even.
        for (size_t i = 0; i < x.size(); ++i)
          x[i] = static_cast<float>(static_cast<int>(i % 509) - 254) / 127.0f;
      } else if (variant == 2) {
        std::fill(x.begin(), x.begin() + k, 0.0f);
      } else if (variant == 3) {
        x[static_cast<size_t>(k / 2)] = NAN;
        x[static_cast<size_t>(k + k / 3)] = INFINITY;
        x[static_cast<size_t>(2 * k)] = -INFINITY;
      }
      for (bool offset128 : {false, true}) {
        const int64_t g = offset128 ? 0 : groups;
        auto copy = [&](const QuantizedActivations& a) {
          std::vector<int32_t> out(a.q, a.q + m * k_pad);
          for (int64_t i = 0; i < m; ++i) {
            uint32_t bits = 0;
            std::memcpy(&bits, &a.scale[i], 4);
            out.push_back(static_cast<int32_t>(bits));
          }
          out.insert(out.end(), a.group_sums, a.group_sums + m * g);
          return out;
        };
        const auto want = copy(quantize_activations(x.data(), m, k, k_pad, g, offset128, nullptr));
        const auto got = copy(quantize_activations(x.data(), m, k, k_pad, g, offset128, nullptr, 1, row_fn));
        EXPECT_EQ(got, want) << "k " << k << " variant " << variant << " offset128 " << offset128;
      }
    }
  }
}

TEST(Activations, Avx2RowQuantizerMatchesScalar) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx2);
  expect_row_quantizer_matches_scalar(quantize_row_avx2);
}

TEST(Activations, Avx512RowQuantizerMatchesScalar) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx512);
  expect_row_quantizer_matches_scalar(quantize_row_avx512);
}

// The embedding lookup reads the same numbers the GEMM multiplies: x = e_j picks column j of W, i.e.
// element j of every dequantized row.
TEST(DequantizeRow, MatchesWhatTheGemmMultiplies) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  const int64_t n = 40, k = 136;
  auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng);
  for (WeightFormat format : all_formats()) {
    const QuantizedWeight w = quantize_weight(src.w, format, pool);
    const std::vector<float> rows = dequantize_all(w);
    std::vector<float> eye(static_cast<size_t>(k * k), 0.0f), y(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < k; ++j) eye[j * k + j] = 1.0f;
    gemm_ref(eye.data(), k, w, y.data(), n);
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t r = 0; r < n; ++r) {
        // One-hot activations quantize to 127 with scale 1/127: exact up to f32 rounding of the scales.
        EXPECT_NEAR(y[j * n + r], rows[r * k + j], 2e-6f * std::fabs(rows[r * k + j]) + 1e-7f)
            << weight_format_name(format) << " row " << r << " col " << j;
      }
    }
    EXPECT_THROW(dequantize_row(w, n, y.data()), Error);
  }
}

TEST(PackedTensors, RoundTripWithoutCopying) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  const int64_t n = 50, k = 260, m = 6;
  auto src = test::gaussian_weight(FloatDType::kBF16, n, k, rng);
  std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * k), rng);
  for (WeightFormat format : all_formats()) {
    const QuantizedWeight w = quantize_weight(src.w, format, pool);
    // Copy the tensors somewhere else (as a file would hold them) and view them there.
    const std::vector<PackedTensor> tensors = packed_tensors(w);
    std::vector<std::vector<uint8_t>> file;
    std::vector<PackedTensor> mapped;
    for (const PackedTensor& t : tensors) {
      file.emplace_back(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.bytes);
      PackedTensor v = t;
      v.data = file.back().data();
      mapped.push_back(v);
    }
    const QuantizedWeight view = view_packed_tensors(format, n, k, mapped, "layer.w");
    EXPECT_EQ(view.qweight, mapped[0].data);  // no copy
    EXPECT_EQ(view.owner, nullptr);
    std::vector<float> y0(static_cast<size_t>(m * n)), y1(y0.size());
    gemm(x.data(), m, w, y0.data(), n, pool);
    gemm(x.data(), m, view, y1.data(), n, pool);
    EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)), 0) << weight_format_name(format);

    // A wrong shape, dtype or a missing tensor is one clear error naming the tensor.
    std::vector<PackedTensor> bad = mapped;
    bad[0].shape[0] += 1;
    try {
      view_packed_tensors(format, n, k, bad, "layer.w");
      ADD_FAILURE() << "accepted a wrong shape";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer.w." + mapped[0].name), std::string::npos) << e.what();
    }
    bad = mapped;
    bad.back().dtype = bad.back().dtype == TensorDType::kF32 ? TensorDType::kF16 : TensorDType::kF32;
    EXPECT_THROW(view_packed_tensors(format, n, k, bad, "layer.w"), Error);
    bad = mapped;
    bad.pop_back();
    EXPECT_THROW(view_packed_tensors(format, n, k, bad, "layer.w"), Error);
    EXPECT_THROW(view_packed_tensors(format, n, k + 300, mapped, "layer.w"), Error);
  }
}

}  // namespace

}  // namespace spark::kernels
