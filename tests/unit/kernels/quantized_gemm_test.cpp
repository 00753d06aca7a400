// Every GEMM kernel of every instruction-set tier against the scalar reference, for every weight format,
// over activation row counts on both sides of the decode/prefill switch and shapes that are and are not
// multiples of the 16-row blocks and the 64/128-column K padding.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <random>
#include <tuple>
#include <vector>

#include "gemm/dispatch.h"
#include "gemm/gemm_isa.h"
#include "kernel_test_util.h"
#include "util/half.h"

namespace spark::kernels {

namespace {

using test::all_formats;
using test::is_integer_format;

// Float paths (f32/bf16/f16 weights, and W4A16 whose kernels reassociate sums) are held to this NMSE
// against the double-accumulating reference; integer paths must match it bit for bit.
constexpr double kFloatNmse = 1e-10;

FloatDType source_dtype(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBF16:
      return FloatDType::kBF16;
    case WeightFormat::kF16:
      return FloatDType::kF16;
    default:
      return FloatDType::kF32;
  }
}

struct Shape {
  int64_t n, k;
};

// N not a multiple of 16 (and of 32/64 used by the task split), K not a multiple of 4, 64 or 128. 917 rows
// are 58 blocks: with the tests' 3 threads, two decode tasks of 16 blocks (a decode tile of nb blocks takes
// every (16 / nb)-th), then tasks of 4 and a last one of 2 blocks whose last block has 5 rows. 709 x 300 is
// the same with one 16-block task and 3 groups of 128, so a decode tile's blocks are several groups apart.
// 61 rows are one task of 4 blocks: strided for the tiles of 2 blocks, the second ending in the 13-row block.
const std::vector<Shape> kShapes = {{1, 1},    {5, 64},   {16, 128},  {17, 200}, {33, 129},
                                    {61, 200}, {70, 300}, {130, 520}, {917, 72}, {709, 300}};
// Every decode row count (1 to kDecodeMaxM = 4), then prefill tiles with row tails.
const std::vector<int64_t> kRows = {1, 2, 3, 4, 7, 16, 33, 64, 128, 511};

class GemmTierTest : public ::testing::TestWithParam<std::tuple<Isa, WeightFormat>> {};

TEST_P(GemmTierTest, MatchesReference) {
  const auto [isa, format] = GetParam();
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(isa);
  std::mt19937 rng(static_cast<unsigned>(1000 + 10 * static_cast<int>(isa) + static_cast<int>(format)));
  ThreadPool pool(3);
  for (const Shape& s : kShapes) {
    // The largest activation counts only with the smaller shapes: the scalar reference is slow.
    for (int64_t m : kRows) {
      if (m * s.n * s.k > 40'000'000) continue;
      // Fresh random inputs for every shape: the kernel must compute the same function on any input.
      auto src = test::gaussian_weight(source_dtype(format), s.n, s.k, rng, 0.05f);
      const QuantizedWeight w = quantize_weight(src.w, format, pool);
      std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * s.k), rng);
      // Rows of very different magnitudes (per-token scales) and an all-zero row (scale 0).
      for (int64_t i = 0; i < m; ++i) {
        const float mag = i % 3 == 0 ? 1.0f : (i % 3 == 1 ? 30.0f : 0.01f);
        for (int64_t kk = 0; kk < s.k; ++kk) x[i * s.k + kk] *= mag;
      }
      if (m > 2) std::fill(x.begin() + s.k, x.begin() + 2 * s.k, 0.0f);
      const int64_t ldy = s.n + 3;  // columns past N must stay untouched
      std::vector<float> y(static_cast<size_t>(m * ldy), NAN), ref(y.size(), NAN);
      gemm_at(isa, x.data(), m, w, y.data(), ldy, pool);
      gemm_ref(x.data(), m, w, ref.data(), ldy);
      const std::string where = std::string(isa_name(isa)) + " " + weight_format_name(format) +
                                " m=" + std::to_string(m) + " n=" + std::to_string(s.n) +
                                " k=" + std::to_string(s.k);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          const float got = y[i * ldy + j];
          if (j >= s.n) {
            ASSERT_TRUE(std::isnan(got)) << where << ": wrote past N at (" << i << "," << j << ")";
          } else if (is_integer_format(format)) {
            ASSERT_EQ(got, ref[i * ldy + j]) << where << " at (" << i << "," << j << ")";
          } else {
            ASSERT_TRUE(std::isfinite(got)) << where << ": output (" << i << "," << j << ") not written";
          }
        }
      }
      if (!is_integer_format(format)) {
        EXPECT_LE(test::nmse(y.data(), ref.data(), m, s.n, ldy), kFloatNmse) << where;
      }
    }
  }
}

std::string tier_test_name(const ::testing::TestParamInfo<std::tuple<Isa, WeightFormat>>& info) {
  return std::string(isa_name(std::get<0>(info.param))) + "_" + weight_format_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTiers, GemmTierTest,
                         ::testing::Combine(::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512,
                                                              Isa::kAmx),
                                            ::testing::ValuesIn(all_formats())),
                         tier_test_name);

// Every W4A16 kernel body called directly (the dispatcher picks only one per CPU): AMX-BF16 tiles,
// vdpbf16ps tiles (AVX512-BF16), the f32 AVX-512 fallback and AVX2, at every decode row count 1..8, prefill
// tiles with row tails (the f32 bodies: register tiles up to 64 rows on AVX2 and 8 on AVX-512, then
// panels), K on both sides of group boundaries and N tails inside a 16-row block and a 4-block task.
struct W4A16Body {
  const char* name;
  GemmFn fn;
  bool (*available)();
};

const W4A16Body kW4A16Bodies[] = {
    {"amx", gemm_w4a16_amx,
     [] {
       return cpu_supports(Isa::kAmx) && cpu_features().amx_bf16 && cpu_features().avx512_bf16 &&
              cpu_features().avx512_vbmi;
     }},
    {"avx512bf16", gemm_w4a16_bf16_avx512,
     [] { return cpu_supports(Isa::kAvx512) && cpu_features().avx512_bf16 && cpu_features().avx512_vbmi; }},
    {"avx512", gemm_w4a16_avx512, [] { return cpu_supports(Isa::kAvx512); }},
    {"avx2", gemm_w4a16_avx2, [] { return cpu_supports(Isa::kAvx2); }},
};

class W4A16BodyTest : public ::testing::TestWithParam<int> {};

TEST_P(W4A16BodyTest, MatchesReferenceAtGroupBoundariesAndRowTails) {
  const W4A16Body& body = kW4A16Bodies[GetParam()];
  if (!body.available()) GTEST_SKIP() << "skipped: CPU lacks " << body.name;
  std::mt19937 rng(31);
  ThreadPool pool(3);
  const std::vector<Shape> shapes = {{16, 127}, {1, 128},   {31, 129}, {65, 256},
                                     {79, 257}, {130, 640}, {61, 200}, {709, 300}};
  const std::vector<int64_t> rows = {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 64, 70};
  for (const Shape& s : shapes) {
    for (int64_t m : rows) {
      auto src = test::gaussian_weight(FloatDType::kF32, s.n, s.k, rng, 0.05f);
      const QuantizedWeight w = quantize_weight(src.w, WeightFormat::kW4A16, pool);
      std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * s.k), rng);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t kk = 0; kk < s.k; ++kk) {
          float& v = x[i * s.k + kk];
          // Row kinds: plain; a large common offset (Σ x dominates, the case where the kernels' group
          // offsets cancel); tiny values; magnitudes spread over 2^±20.
          if (i % 4 == 1) v = 10.0f + v;
          if (i % 4 == 2) v *= 1e-3f;
          if (i % 4 == 3) v = std::ldexp(v, static_cast<int>(kk % 41) - 20);
        }
      }
      const int64_t ldy = s.n + 5;
      std::vector<float> y(static_cast<size_t>(m * ldy), NAN), ref(y.size(), NAN);
      body.fn(x.data(), m, w, y.data(), ldy, pool);
      gemm_ref(x.data(), m, w, ref.data(), ldy);
      std::vector<float> row(static_cast<size_t>(s.k));
      std::vector<double> abs_dot(static_cast<size_t>(m * s.n), 0.0);
      for (int64_t j = 0; j < s.n; ++j) {
        dequantize_row(w, j, row.data());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t kk = 0; kk < s.k; ++kk)
            abs_dot[i * s.n + j] += std::fabs(static_cast<double>(x[i * s.k + kk]) * row[kk]);
        }
      }
      const std::string where = std::string(body.name) + " m=" + std::to_string(m) +
                                " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j < s.n) {
            ASSERT_TRUE(std::isfinite(y[i * ldy + j])) << where << " (" << i << "," << j << ")";
          } else {
            ASSERT_TRUE(std::isnan(y[i * ldy + j])) << where << ": wrote past N";
          }
        }
        // Per row and against Σ_k |x · w| (the scale of f32 rounding in any summation order), so rows
        // whose outputs cancel to near zero are held to what reassociated f32 arithmetic can give.
        double err = 0.0, scale = 0.0;
        for (int64_t j = 0; j < s.n; ++j) {
          const double d = static_cast<double>(y[i * ldy + j]) - ref[i * ldy + j];
          err += d * d;
          scale += abs_dot[i * s.n + j] * abs_dot[i * s.n + j];
        }
        EXPECT_LE(err, kFloatNmse * scale) << where << " row " << i;
      }
    }
  }
}

// One-hot activations read single weight columns back: y[i, n] = w[n, k_i] for the column k_i row i
// selects, so a kernel that pairs the wrong activation with a nibble fails at that exact k.
TEST_P(W4A16BodyTest, OneHotRowsReadEachColumn) {
  const W4A16Body& body = kW4A16Bodies[GetParam()];
  if (!body.available()) GTEST_SKIP() << "skipped: CPU lacks " << body.name;
  std::mt19937 rng(32);
  ThreadPool pool(2);
  const int64_t n = 40, k = 300;
  auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng, 0.05f);
  const QuantizedWeight w = quantize_weight(src.w, WeightFormat::kW4A16, pool);
  std::vector<float> col(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) dequantize_row(w, j, col.data() + j * k);
  // 8 and 40 rows are prefill tiles (AMX: a 16-row strip; a 32-row step and a strip).
  for (int64_t m : {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{40}}) {
    for (int64_t k0 = 0; k0 < k; k0 += m) {
      std::vector<float> x(static_cast<size_t>(m * k), 0.0f), y(static_cast<size_t>(m * n), NAN);
      for (int64_t i = 0; i < m && k0 + i < k; ++i) x[i * k + k0 + i] = 1.0f;
      body.fn(x.data(), m, w, y.data(), n, pool);
      for (int64_t i = 0; i < m && k0 + i < k; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const float want = col[j * k + k0 + i];
          ASSERT_NEAR(y[i * n + j], want, 1e-5f * std::fabs(want) + 1e-6f)
              << body.name << " m=" << m << " k=" << k0 + i << " n=" << j;
        }
      }
    }
  }
}

// Rows at the ends of the f32 range, all-zero groups and non-finite values, at 1 and 2 rows (the AVX2
// integer-grid tiles, whose grids follow each group's largest value) and 5 (the float tiles). Each finite
// row keeps one magnitude, so its error is held at that magnitude's scale as in
// MatchesReferenceAtGroupBoundariesAndRowTails; a NaN makes its row NaN and an Inf makes it non-finite, as
// f32 products do. No value is a bf16 subnormal: the bf16 dot products (vdpbf16ps, tdpbf16ps) take those as
// zero.
TEST_P(W4A16BodyTest, RowsOfExtremeMagnitudeZerosAndNonFiniteValues) {
  const W4A16Body& body = kW4A16Bodies[GetParam()];
  if (!body.available()) GTEST_SKIP() << "skipped: CPU lacks " << body.name;
  std::mt19937 rng(33);
  ThreadPool pool(2);
  const int64_t n = 40, k = 512;  // four groups
  auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng, 0.05f);
  const QuantizedWeight w = quantize_weight(src.w, WeightFormat::kW4A16, pool);
  std::vector<float> col(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) dequantize_row(w, j, col.data() + j * k);
  // Row kinds: 0 a group of zeros, then N(0, 1); 1 ~1e30; 2 ~1e-30 (the grids' largest exponent near
  // -100, where their scaling goes to two steps); 3 spread over 2^±30 in every group; 4 ~1e-35; 5 between
  // 2^-126 and 2^-121 (the grids' exponent held at -120); 6 one NaN; 7 one Inf.
  constexpr int kKinds = 8;
  const auto fill = [&](int kind, float* x) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float v = normal(rng);
      const float away_from_zero = std::copysign(std::max(std::fabs(v), 0.01f), v);
      switch (kind) {
        case 0:
          x[kk] = kk < 128 ? 0.0f : v;
          break;
        case 1:
          x[kk] = v * 1e30f;
          break;
        case 2:
          x[kk] = away_from_zero * 1e-30f;
          break;
        case 3:
          x[kk] = std::ldexp(v, static_cast<int>(kk % 61) - 30);
          break;
        case 4:
          x[kk] = away_from_zero * 1e-35f;
          break;
        case 5:
          x[kk] = std::copysign(std::ldexp(0.5f + 0.5f * unit(rng), -120 - static_cast<int>(kk % 6)), v);
          break;
        default:
          x[kk] = v;
      }
    }
    if (kind == 6) x[300] = NAN;
    if (kind == 7) x[77] = INFINITY;
  };
  for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{5}}) {
    for (int first = 0; first < kKinds; ++first) {
      std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n), NAN), ref(y.size());
      for (int64_t i = 0; i < m; ++i) fill(static_cast<int>((first + i) % kKinds), x.data() + i * k);
      body.fn(x.data(), m, w, y.data(), n, pool);
      gemm_ref(x.data(), m, w, ref.data(), n);
      for (int64_t i = 0; i < m; ++i) {
        const int kind = static_cast<int>((first + i) % kKinds);
        const std::string where =
            std::string(body.name) + " m=" + std::to_string(m) + " row kind " + std::to_string(kind);
        double err = 0.0, scale = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const float got = y[i * n + j];
          if (kind == 6) {
            ASSERT_TRUE(std::isnan(got)) << where << " n=" << j;
            continue;
          }
          if (kind == 7) {
            ASSERT_FALSE(std::isfinite(got)) << where << " n=" << j;
            continue;
          }
          ASSERT_TRUE(std::isfinite(got)) << where << " n=" << j;
          double abs_dot = 0.0;
          for (int64_t kk = 0; kk < k; ++kk) {
            abs_dot += std::fabs(static_cast<double>(x[i * k + kk]) * col[j * k + kk]);
          }
          const double d = static_cast<double>(got) - ref[i * n + j];
          err += d * d;
          scale += abs_dot * abs_dot;
        }
        if (kind < 6) {
          EXPECT_LE(err, kFloatNmse * scale) << where;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bodies, W4A16BodyTest,
                         ::testing::Range(0, static_cast<int>(std::size(kW4A16Bodies))),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kW4A16Bodies[info.param].name);
                         });

// Every integer kernel body called directly, bit for bit against the reference: the dispatcher runs only
// one per tier on a given CPU (the AVX2 tier takes AVX-VNNI's vpdpbusd where the CPU has it, so the
// vpmaddubsw tiles of CPUs without it are tested here).
struct IntegerBody {
  const char* name;
  WeightFormat format;
  GemmFn fn;
  bool (*available)();
};

const IntegerBody kIntegerBodies[] = {
    {"int8_avx2", WeightFormat::kInt8, gemm_int8_avx2, [] { return cpu_supports(Isa::kAvx2); }},
    {"int8_avxvnni", WeightFormat::kInt8, gemm_int8_avxvnni,
     [] { return cpu_supports(Isa::kAvx2) && cpu_features().avx_vnni; }},
    {"int8_avx512", WeightFormat::kInt8, gemm_int8_avx512, [] { return cpu_supports(Isa::kAvx512); }},
    {"w4a8_avx2", WeightFormat::kW4A8, gemm_w4a8_avx2, [] { return cpu_supports(Isa::kAvx2); }},
    {"w4a8_avxvnni", WeightFormat::kW4A8, gemm_w4a8_avxvnni,
     [] { return cpu_supports(Isa::kAvx2) && cpu_features().avx_vnni; }},
    {"w4a8_avx512", WeightFormat::kW4A8, gemm_w4a8_avx512, [] { return cpu_supports(Isa::kAvx512); }},
};

class IntegerBodyTest : public ::testing::TestWithParam<int> {};

TEST_P(IntegerBodyTest, MatchesReferenceBitForBit) {
  const IntegerBody& body = kIntegerBodies[GetParam()];
  if (!body.available()) GTEST_SKIP() << "skipped: CPU lacks " << body.name;
  std::mt19937 rng(static_cast<unsigned>(77 + GetParam()));
  ThreadPool pool(3);
  for (const Shape& s : kShapes) {
    for (int64_t m : kRows) {
      if (m * s.n * s.k > 40'000'000) continue;
      auto src = test::gaussian_weight(FloatDType::kF32, s.n, s.k, rng, 0.05f);
      const QuantizedWeight w = quantize_weight(src.w, body.format, pool);
      std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * s.k), rng);
      // Rows of very different magnitudes, an all-zero row, and a row whose activations all quantize to
      // +-127 (the products' extremes, where vpmaddubsw would saturate without the sign trick).
      for (int64_t i = 0; i < m; ++i) {
        const float mag = i % 3 == 0 ? 1.0f : (i % 3 == 1 ? 30.0f : 0.01f);
        for (int64_t kk = 0; kk < s.k; ++kk) x[i * s.k + kk] *= mag;
      }
      if (m > 2) std::fill(x.begin() + s.k, x.begin() + 2 * s.k, 0.0f);
      if (m > 3) {
        for (int64_t kk = 0; kk < s.k; ++kk) x[2 * s.k + kk] = kk % 2 ? -1.0f : 1.0f;
      }
      const int64_t ldy = s.n + 3;
      std::vector<float> y(static_cast<size_t>(m * ldy), NAN), ref(y.size(), NAN);
      body.fn(x.data(), m, w, y.data(), ldy, pool);
      gemm_ref(x.data(), m, w, ref.data(), ldy);
      const std::string where = std::string(body.name) + " m=" + std::to_string(m) +
                                " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j >= s.n) {
            ASSERT_TRUE(std::isnan(y[i * ldy + j])) << where << ": wrote past N at (" << i << "," << j << ")";
          } else {
            ASSERT_EQ(y[i * ldy + j], ref[i * ldy + j]) << where << " at (" << i << "," << j << ")";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bodies, IntegerBodyTest,
                         ::testing::Range(0, static_cast<int>(std::size(kIntegerBodies))),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kIntegerBodies[info.param].name);
                         });

// kW4A16 is defined on bf16-rounded activations: the reference's result does not move when x is rounded
// first, and differs measurably from exact f32 products of the same weights.
TEST(GemmReference, W4A16RoundsActivationsToBf16) {
  std::mt19937 rng(33);
  ThreadPool pool(2);
  const int64_t n = 24, k = 256, m = 3;
  auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng, 0.05f);
  const QuantizedWeight w = quantize_weight(src.w, WeightFormat::kW4A16, pool);
  std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * k), rng), xr(x.size());
  for (size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
  std::vector<float> y(static_cast<size_t>(m * n)), yr(y.size()), exact(y.size()),
      row(static_cast<size_t>(k));
  gemm_ref(x.data(), m, w, y.data(), n);
  gemm_ref(xr.data(), m, w, yr.data(), n);
  for (int64_t j = 0; j < n; ++j) {
    dequantize_row(w, j, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) acc += static_cast<double>(x[i * k + kk]) * row[kk];
      exact[i * n + j] = static_cast<float>(acc);
    }
  }
  EXPECT_EQ(y, yr);
  const double rounding = test::nmse(y.data(), exact.data(), m, n, n);
  EXPECT_GT(rounding, 1e-8);
  EXPECT_LT(rounding, 1e-4);
}

// The reference's integer arithmetic is itself checked against f64 products of the dequantized operands:
// it may only differ by f32 rounding. Operands are full range (every product ±127·127 for int8), the case
// where vpmaddubsw without the sign trick saturates; then weights of one sign but the first of each group
// (so W4A8 maps that one to -8, nibble 0, and the rest to +7, nibble 15) and the activations of a row all
// +127 or all -127: the largest sums the W4A8 kernels' s16 runs are asked to hold.
TEST(GemmReference, IntegerPathsEqualDequantizedProducts) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const int64_t n = 48, k = 384, m = 5;
  std::bernoulli_distribution coin(0.5);
  for (WeightFormat format : {WeightFormat::kInt8, WeightFormat::kW4A8}) {
    for (bool one_sign : {false, true}) {
      const std::string what = std::string(weight_format_name(format)) + (one_sign ? " one sign" : " mixed");
      std::vector<float> wv(static_cast<size_t>(n * k)), x(static_cast<size_t>(m * k));
      // Mixed: every q is ±127 (int8) or -8/+7 (w4a8). One sign: W4A8 nibbles 15 and one 0 a group.
      for (size_t t = 0; t < wv.size(); ++t) {
        if (one_sign)
          wv[t] = static_cast<int64_t>(t) % k % kGroupSize == 0 ? -8.0f / 7.0f : 1.0f;
        else
          wv[t] = coin(rng) ? 1.0f : -1.0f;
      }
      // Every activation q is ±127; with one sign +127 in even rows and -127 in odd ones.
      for (size_t t = 0; t < x.size(); ++t)
        x[t] = (one_sign ? (t / static_cast<size_t>(k)) % 2 == 0 : coin(rng)) ? 2.0f : -2.0f;
      const QuantizedWeight w = quantize_weight(FloatWeight{FloatDType::kF32, wv.data(), n, k}, format, pool);
      std::vector<float> ref(static_cast<size_t>(m * n)), row(static_cast<size_t>(k));
      gemm_ref(x.data(), m, w, ref.data(), n);
      for (int64_t j = 0; j < n; ++j) {
        dequantize_row(w, j, row.data());
        for (int64_t i = 0; i < m; ++i) {
          double want = 0.0;
          for (int64_t kk = 0; kk < k; ++kk) want += static_cast<double>(x[i * k + kk]) * row[kk];
          EXPECT_NEAR(ref[i * n + j], want, 1e-5 * std::fabs(want) + 1e-4) << what;
        }
      }
      // And every tier the CPU has, and every integer body it can run, reproduces it exactly on these
      // operands (one row: the decode tiles; five: the prefill tiles and a one-row rest).
      for (int64_t rows : {int64_t{1}, m}) {
        for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
          if (!cpu_supports(isa)) continue;
          std::vector<float> y(static_cast<size_t>(rows * n), NAN);
          gemm_at(isa, x.data(), rows, w, y.data(), n, pool);
          for (int64_t t = 0; t < rows * n; ++t) ASSERT_EQ(y[t], ref[t]) << isa_name(isa) << " " << what;
        }
        for (const IntegerBody& body : kIntegerBodies) {
          if (body.format != format || !body.available()) continue;
          std::vector<float> y(static_cast<size_t>(rows * n), NAN);
          body.fn(x.data(), rows, w, y.data(), n, pool);
          for (int64_t t = 0; t < rows * n; ++t) ASSERT_EQ(y[t], ref[t]) << body.name << " " << what;
        }
      }
    }
  }
}

// Quantized GEMMs approximate the f32 product of the original weights: the end-to-end error of each format
// on gaussian data, bounded (in NMSE) by what its bits allow.
TEST(GemmAccuracy, FormatsApproximateTheFloatProduct) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const int64_t n = 96, k = 1024, m = 8;
  auto src = test::gaussian_weight(FloatDType::kF32, n, k, rng, 0.02f);
  std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * k), rng);
  std::vector<float> exact(static_cast<size_t>(m * n));
  gemm_float_ref(x.data(), m, src.w, exact.data(), n);
  const std::pair<WeightFormat, double> bounds[] = {
      {WeightFormat::kF32, 1e-12}, {WeightFormat::kBF16, 1e-5}, {WeightFormat::kF16, 1e-6},
      {WeightFormat::kInt8, 2e-4}, {WeightFormat::kW4A8, 2e-2}, {WeightFormat::kW4A16, 1.5e-2}};
  for (const auto& [format, bound] : bounds) {
    const QuantizedWeight w = quantize_weight(src.w, format, pool);
    std::vector<float> y(exact.size());
    gemm(x.data(), m, w, y.data(), n, pool);
    EXPECT_LE(test::nmse(y.data(), exact.data(), m, n, n), bound) << weight_format_name(format);
  }
}

// bf16 weights with activations rounded to bf16 (vdpbf16ps): exact products of the rounded activations,
// so against the reference fed the same rounded activations only summation order differs; against the
// exact f32 reference the error is the activation rounding, reported here and bounded.
class Bf16ActivationsTest : public ::testing::TestWithParam<Isa> {};

TEST_P(Bf16ActivationsTest, MatchesReferenceOnRoundedActivations) {
  const Isa isa = GetParam();
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(isa);
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "skipped: CPU lacks AVX512-BF16";
  std::mt19937 rng(21);
  ThreadPool pool(3);
  double worst_exact_nmse = 0.0;
  // kRows, the row-dot chunkings of vdpbf16ps (one chunk of 5 or 6 rows, 6 + 6, 5 + 4 + 4) and both sides
  // of its bound.
  std::vector<int64_t> rows = kRows;
  rows.insert(rows.end(), {5, 6, 12, 13, kBf16DotRowDotsMaxM, kBf16DotRowDotsMaxM + 1});
  for (const Shape& s : kShapes) {
    for (int64_t m : rows) {
      if (m * s.n * s.k > 40'000'000) continue;
      auto src = test::gaussian_weight(FloatDType::kBF16, s.n, s.k, rng);
      QuantizedWeight w = quantize_weight(src.w, WeightFormat::kBF16, pool);
      w.bf16_activations = true;
      std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * s.k), rng), xr(x.size());
      for (size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
      const int64_t ldy = s.n + 3;
      std::vector<float> y(static_cast<size_t>(m * ldy), NAN), ref(y.size(), NAN), exact(y.size(), NAN);
      gemm_at(isa, x.data(), m, w, y.data(), ldy, pool);
      QuantizedWeight exact_w = w;  // the reference with the flag rounds x itself; without it, exact
      exact_w.bf16_activations = false;
      gemm_ref(xr.data(), m, exact_w, ref.data(), ldy);
      gemm_ref(x.data(), m, exact_w, exact.data(), ldy);
      const std::string where =
          "m=" + std::to_string(m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j < s.n) {
            ASSERT_TRUE(std::isfinite(y[i * ldy + j])) << where;
          } else {
            ASSERT_TRUE(std::isnan(y[i * ldy + j])) << where << ": wrote past N";
          }
        }
      }
      EXPECT_LE(test::nmse(y.data(), ref.data(), m, s.n, ldy), kFloatNmse) << where;
      worst_exact_nmse = std::max(worst_exact_nmse, test::nmse(y.data(), exact.data(), m, s.n, ldy));
    }
  }
  std::printf("[ accuracy ] bf16 activations (%s): worst NMSE vs exact f32 activations %.2e\n", isa_name(isa),
              worst_exact_nmse);
  EXPECT_LE(worst_exact_nmse, 1e-4);
  EXPECT_GT(worst_exact_nmse, 0.0);  // the rounding is real: this path is not the exact one
}

// avx512: vdpbf16ps row dots and pair panels; amx: tdpbf16ps tiles for m > 4.
INSTANTIATE_TEST_SUITE_P(Tiers, Bf16ActivationsTest, ::testing::Values(Isa::kAvx512, Isa::kAmx),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(isa_name(info.param));
                         });

// Every tier rounds the activations when the flag is set: without vdpbf16ps the f32 kernels run on the
// rounded activations, and the scalar reference rounds them itself. So a bf16 checkpoint with
// bf16_activations gives the same numbers (to summation order) on every CPU.
class Bf16ActivationsEveryTierTest : public ::testing::TestWithParam<Isa> {};

TEST_P(Bf16ActivationsEveryTierTest, RoundsTheActivations) {
  const Isa isa = GetParam();
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(isa);
  std::mt19937 rng(22);
  ThreadPool pool(2);
  auto src = test::gaussian_weight(FloatDType::kBF16, 40, 300, rng);
  QuantizedWeight exact_w = quantize_weight(src.w, WeightFormat::kBF16, pool);
  QuantizedWeight w = exact_w;
  w.bf16_activations = true;
  for (int64_t m : {1, 5, 40}) {
    std::vector<float> x = test::gaussian_vector(static_cast<size_t>(m * 300), rng), xr(x.size());
    for (size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
    std::vector<float> y(static_cast<size_t>(m * 40)), ref(y.size()), exact(y.size());
    gemm_at(isa, x.data(), m, w, y.data(), 40, pool);
    gemm_ref(xr.data(), m, exact_w, ref.data(), 40);
    gemm_ref(x.data(), m, exact_w, exact.data(), 40);
    EXPECT_LE(test::nmse(y.data(), ref.data(), m, 40, 40), kFloatNmse) << "m=" << m;
    // Rounding moves the result by ~1e-5 NMSE, far more than summation order (<= kFloatNmse).
    EXPECT_GT(test::nmse(y.data(), exact.data(), m, 40, 40), 100 * kFloatNmse) << "m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiers, Bf16ActivationsEveryTierTest,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(isa_name(info.param));
                         });

}  // namespace

}  // namespace spark::kernels
