#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/cpu_features.h"
#include "gemm_float/gemm_float.h"
#include "gemm_float/gemm_float_isa.h"
#include "util/half.h"

namespace spark::kernels {

namespace {

struct Case {
  int64_t m, n, k;
};

std::vector<uint8_t> random_weight(FloatDType dtype, int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * k * float_dtype_size(dtype)));
  for (int64_t i = 0; i < n * k; ++i) {
    float v = dist(rng);
    if (dtype == FloatDType::kF32) {
      std::memcpy(bytes.data() + i * 4, &v, 4);
    } else {
      uint16_t h = dtype == FloatDType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(bytes.data() + i * 2, &h, 2);
    }
  }
  return bytes;
}

using GemmFn = void (*)(const float*, int64_t, const FloatWeight&, float*, int64_t, ThreadPool&);

struct Shapes {
  std::vector<int64_t> ms, ns, ks;
};

// Row dots up to 4 rows (AVX2 6), in chunks of at most 4 (AVX2 6) up to float_row_dots_max_m (AVX2 16,
// AVX-512 48 / 64), panels above. The decode row dots read a task's rows as R strided runs when R (8, 4 or
// AVX2's 2) divides them and they are more than R (16, 64 and the first task of 65 and 130), else
// consecutively (5, 17, 63, the last row of 65, the last 2 of 130).
const Shapes kShapes = {{1, 2, 3, 4, 5, 6, 7, 12, 13, 16, 17, 24, 25, 33, 49, 65, 128},
                        {1, 5, 16, 17, 63, 64, 65, 130},
                        {1, 7, 8, 9, 255, 256, 257, 600}};

// Decode tasks before the last 2 x 64 rows per thread are 256 rows (run_row_dot_tasks): with 3 threads,
// 1,000 rows are two tasks of 256 (runs of 256 / R rows a stream) and 64-row tasks, the last of 40. Every
// decode row count of both tiers, and 7 (chunks).
const Shapes kLargeTasks = {{1, 2, 3, 4, 5, 6, 7}, {1000}, {64, 257}};

void check_against_reference(GemmFn fn, const char* label, const Shapes& shapes = kShapes) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ThreadPool pool(3);
  const auto& [ms, ns, ks] = shapes;
  for (FloatDType dtype : {FloatDType::kF32, FloatDType::kBF16, FloatDType::kF16}) {
    for (int64_t m : ms) {
      for (int64_t n : ns) {
        for (int64_t k : ks) {
          // Fresh random inputs for every shape: the kernel must compute the same function on any input.
          auto wbytes = random_weight(dtype, n, k, rng);
          FloatWeight w{dtype, wbytes.data(), n, k};
          std::vector<float> x(static_cast<size_t>(m * k));
          for (float& v : x) v = dist(rng);
          const int64_t ldy = n + 3;  // a row stride wider than N: columns past N must stay untouched
          std::vector<float> y(static_cast<size_t>(m * ldy), NAN), ref(y.size(), NAN);
          fn(x.data(), m, w, y.data(), ldy, pool);
          gemm_float_ref(x.data(), m, w, ref.data(), ldy);
          std::vector<float> wrow(static_cast<size_t>(k));
          for (int64_t j = 0; j < n; ++j) {
            float_weight_to_f32(w, j * k, k, wrow.data());
            for (int64_t i = 0; i < m; ++i) {
              double mag = 0;
              for (int64_t kk = 0; kk < k; ++kk) mag += std::fabs(x[i * k + kk] * wrow[kk]);
              const float got = y[i * ldy + j], want = ref[i * ldy + j];
              ASSERT_TRUE(std::isfinite(got))
                  << label << " unwritten output m=" << m << " n=" << n << " k=" << k;
              ASSERT_LE(std::fabs(got - want), 1e-5 * mag + 1e-30)
                  << label << " " << float_dtype_name(dtype) << " m=" << m << " n=" << n << " k=" << k
                  << " at (" << i << "," << j << ")";
            }
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j2 = n; j2 < ldy; ++j2)
                ASSERT_TRUE(std::isnan(y[i * ldy + j2])) << label << " wrote past N";
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST(GemmFloat, DispatchMatchesReference) {
  check_against_reference(gemm_float, isa_name(active_isa()));
}

TEST(GemmFloat, Avx2MatchesReference) {
  if (!cpu_supports(Isa::kAvx2)) GTEST_SKIP() << "skipped: CPU lacks AVX2+FMA+F16C";
  check_against_reference(gemm_float_avx2, "avx2");
}

TEST(GemmFloat, Avx512MatchesReference) {
  if (!cpu_supports(Isa::kAvx512)) GTEST_SKIP() << "skipped: CPU lacks " << isa_requirements(Isa::kAvx512);
  check_against_reference(gemm_float_avx512, "avx512");
}

TEST(GemmFloat, LargeDecodeTasksMatchReference) {
  check_against_reference(gemm_float, isa_name(active_isa()), kLargeTasks);
  if (cpu_supports(Isa::kAvx2)) check_against_reference(gemm_float_avx2, "avx2", kLargeTasks);
}

}  // namespace spark::kernels
