// Rounding f32 activations to bf16 the way kW4A16 defines them (round to nearest even, as f32_to_bf16
// in util/half.h), for the AVX-512 W4A16 kernels. Include only from AVX-512 translation units.
#pragma once

#include <immintrin.h>

namespace spark::kernels {
namespace {

// The f32 bits of bf16(v) (low half zero); NaN stays a quiet NaN instead of carrying into the exponent.
inline __m512i round_to_bf16(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __m512i nan = _mm512_or_si512(b, _mm512_set1_epi32(0x400000));
  const __m512i out = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
  return _mm512_and_si512(out, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
}

}  // namespace
}  // namespace spark::kernels
