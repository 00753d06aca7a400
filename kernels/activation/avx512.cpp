#include <immintrin.h>

#include "activation/activation_isa.h"

// glibc libmvec: erff on 16 floats (the x86-64 vector ABI name for AVX-512).
extern "C" __m512 _ZGVeN16v_erff(__m512 x);

namespace spark::kernels {

void geglu_avx512(const float* gate, const float* up, float* out, size_t n) {
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 inv_sqrt2 = _mm512_set1_ps(0.70710678118654752f);
  for (size_t i = 0; i < n; i += 16) {
    // The tail loads zeros past n and stores only the first n - i lanes.
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = _ZGVeN16v_erff(_mm512_mul_ps(g, inv_sqrt2));
    const __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(half, g), _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(gelu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace spark::kernels
