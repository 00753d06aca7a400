#include <immintrin.h>

#include "activation/activation.h"
#include "activation/activation_isa.h"

// glibc libmvec: erff on 8 floats (the x86-64 vector ABI name for AVX2).
extern "C" __m256 _ZGVdN8v_erff(__m256 x);

namespace spark::kernels {

void geglu_avx2(const float* gate, const float* up, float* out, size_t n) {
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(g, inv_sqrt2));
    const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
  if (i < n) geglu_ref(gate + i, up + i, out + i, n - i);
}

}  // namespace spark::kernels
