// The AVX512-BF16 inner loop of the roofline: vdpbf16ps chains (two bf16 products per f32 lane).
#include <immintrin.h>

#include "cpu/unroll.h"
#include "roofline/roofline_isa.h"

namespace spark::kernels {

double bf16_dot_loop_avx512(int64_t iters, float* sink) {
  constexpr int kChains = 12;
  __m512 acc[kChains];
  SPARK_UNROLL
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512i a = _mm512_set1_epi32(0x3f803f80), b = _mm512_set1_epi32(0x33d633d6);  // 1.0, 1e-7
  for (int64_t i = 0; i < iters; ++i) {
    SPARK_UNROLL
    for (int c = 0; c < kChains; ++c) {
      // asm, as in the kernels: GCC 12 otherwise copies the accumulator around each instruction.
      __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc[c]) : "v"(a), "v"(b));
    }
  }
  __m512 s = acc[0];
  SPARK_UNROLL
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  *sink = _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * kChains * 32 * 2;
}

}  // namespace spark::kernels
