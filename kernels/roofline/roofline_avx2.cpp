#include <immintrin.h>

#include "cpu/unroll.h"
#include "roofline/roofline_isa.h"

namespace spark::kernels {

uint64_t read_stream_avx2(const uint8_t* p, size_t bytes) {
  // Four streams with each line asked for 1 KiB ahead, as in read_stream_avx512.
  const size_t q = bytes / 4;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < q; i += 64) {
    for (size_t s = 0; s < 4; ++s)
      _mm_prefetch(reinterpret_cast<const char*>(p + s * q + i + kReadAhead), _MM_HINT_T0);
    const auto* v0 = reinterpret_cast<const __m256i*>(p + i);
    const auto* v1 = reinterpret_cast<const __m256i*>(p + q + i);
    const auto* v2 = reinterpret_cast<const __m256i*>(p + 2 * q + i);
    const auto* v3 = reinterpret_cast<const __m256i*>(p + 3 * q + i);
    a0 = _mm256_xor_si256(a0, _mm256_xor_si256(_mm256_load_si256(v0), _mm256_load_si256(v0 + 1)));
    a1 = _mm256_xor_si256(a1, _mm256_xor_si256(_mm256_load_si256(v1), _mm256_load_si256(v1 + 1)));
    a2 = _mm256_xor_si256(a2, _mm256_xor_si256(_mm256_load_si256(v2), _mm256_load_si256(v2 + 1)));
    a3 = _mm256_xor_si256(a3, _mm256_xor_si256(_mm256_load_si256(v3), _mm256_load_si256(v3 + 1)));
  }
  const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 1) ^
                               _mm256_extract_epi64(a, 2) ^ _mm256_extract_epi64(a, 3));
}

// 10 independent accumulators: enough to cover FMA latency x throughput (4-5 cycles x 2 per cycle).
double fma_loop_avx2(int64_t iters, float* sink) {
  constexpr int kChains = 10;
  __m256 acc[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    SPARK_UNROLL
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 s = acc[0];
  SPARK_UNROLL
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  *sink = _mm256_cvtss_f32(s);
  return static_cast<double>(iters) * kChains * 8 * 2;
}

double int8_loop_avx2(int64_t iters, int32_t* sink) {
  // Only the adds are loop-carried (1-cycle latency), so 5 chains keep the multiply ports busy within 16
  // registers (a chain's operand, its accumulator, and the shared b and ones).
  constexpr int kChains = 5;
  __m256i acc[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  __m256i a[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) a[c] = _mm256_set1_epi8(static_cast<char>(3 + c));
  const __m256i b = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i) {
    SPARK_UNROLL
    for (int c = 0; c < kChains; ++c) {
      // An opaque "update" of each chain's operand keeps its multiplies in the loop and apart.
      __asm__("" : "+x"(a[c]));
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a[c], b), ones));
    }
  }
  __m256i s = acc[0];
  SPARK_UNROLL
  for (int c = 1; c < kChains; ++c) s = _mm256_add_epi32(s, acc[c]);
  *sink = _mm256_extract_epi32(s, 0);
  return static_cast<double>(iters) * kChains * 32 * 2;
}

double int8_loop_avxvnni(int64_t iters, int32_t* sink) {
  // vpdpbusd's accumulator is loop-carried (latency ~4-5 cycles, up to 2 a cycle on the CPUs that have
  // it): 12 chains on the shared operands a and b (14 registers) keep the units busy.
  constexpr int kChains = 12;
  __m256i acc[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
  for (int64_t i = 0; i < iters; ++i) {
    SPARK_UNROLL
    for (int c = 0; c < kChains; ++c) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc[c]) : "x"(a), "x"(b));
  }
  __m256i s = acc[0];
  SPARK_UNROLL
  for (int c = 1; c < kChains; ++c) s = _mm256_add_epi32(s, acc[c]);
  *sink = _mm256_extract_epi32(s, 0);
  return static_cast<double>(iters) * kChains * 32 * 2;
}

}  // namespace spark::kernels
