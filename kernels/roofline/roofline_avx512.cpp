#include <immintrin.h>

#include "cpu/unroll.h"
#include "roofline/roofline_isa.h"

namespace spark::kernels {

uint64_t read_stream_avx512(const uint8_t* p, size_t bytes) {
  // Four streams (the quarters of the range) with each line asked for 1 KiB ahead: the way the decode
  // GEMVs read their blocks. One sequential stream without prefetch kept too few misses in flight and
  // measured ~30% under what the int8 GEMV streams on an AMX Xeon (bench/RESULTS.md, session 11).
  const size_t q = bytes / 4;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < q; i += 64) {
    for (size_t s = 0; s < 4; ++s)
      _mm_prefetch(reinterpret_cast<const char*>(p + s * q + i + kReadAhead), _MM_HINT_T0);
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + q + i));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + 2 * q + i));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + 3 * q + i));
  }
  const __m512i a = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  return static_cast<uint64_t>(_mm512_reduce_or_epi64(a));
}

double fma_loop_avx512(int64_t iters, float* sink) {
  constexpr int kChains = 12;
  __m512 acc[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    SPARK_UNROLL
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  SPARK_UNROLL
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  *sink = _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * kChains * 16 * 2;
}

double int8_loop_avx512(int64_t iters, int32_t* sink) {
  constexpr int kChains = 12;
  __m512i acc[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  for (int64_t i = 0; i < iters; ++i) {
    SPARK_UNROLL
    for (int c = 0; c < kChains; ++c) {
      // asm, as in the int8 kernels: the intrinsic costs two register copies per instruction in GCC 12.
      __asm__("vpdpbusd %2, %1, %0" : "+v"(acc[c]) : "v"(a), "v"(b));
    }
  }
  __m512i s = acc[0];
  SPARK_UNROLL
  for (int c = 1; c < kChains; ++c) s = _mm512_add_epi32(s, acc[c]);
  *sink = _mm512_reduce_or_epi32(s);  // or, not add: the lanes have wrapped around
  return static_cast<double>(iters) * kChains * 64 * 2;
}

}  // namespace spark::kernels
