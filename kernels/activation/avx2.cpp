#include <immintrin.h>

#include "activation/activation_isa.h"

// glibc libmvec: erff on 8 floats (the x86-64 vector ABI name for AVX2).
extern "C" __m256 _ZGVdN8v_erff(__m256 x);

namespace spark::kernels {

void geglu_avx2(const float* gate, const float* up, float* out, size_t n) {
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
  for (size_t i = 0; i < n; i += 8) {
    // The tail loads zeros past n and stores only the first n - i lanes: every element takes the same
    // erf, so a row's values do not depend on how many rows the step holds.
    const int left = n - i >= 8 ? 8 : static_cast<int>(n - i);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(g, inv_sqrt2));
    const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, e));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(gelu, _mm256_maskload_ps(up + i, m)));
  }
}

}  // namespace spark::kernels
