#include <immintrin.h>

#include <cmath>

#include "softmax/softmax.h"
#include "softmax/softmax_isa.h"

// glibc libmvec: exp on 8 doubles (the x86-64 vector ABI name for AVX-512).
extern "C" __m512d _ZGVeN8v_exp(__m512d x);
// ... and expf on 16 floats.
extern "C" __m512 _ZGVeN16v_expf(__m512 x);

namespace spark::kernels {

namespace {

inline __mmask16 lanes_left(size_t n, size_t i) {
  return n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

}  // namespace

size_t argmax_avx512(const float* x, size_t n) {
  // The maximum, then the first lane equal to it: two passes that stream, against a scalar loop whose
  // every compare waits on the last.
  const float m = scaled_max_avx512(x, n, 1.0f);
  if (!(m > -INFINITY)) return 0;
  const __m512 mv = _mm512_set1_ps(m);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 t = lanes_left(n, i);
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(t, _mm512_maskz_loadu_ps(t, x + i), mv, _CMP_EQ_OQ);
    if (eq != 0) return i + static_cast<size_t>(__builtin_ctz(eq));
  }
  return 0;
}

float scaled_max_avx512(const float* x, size_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 none = _mm512_set1_ps(-INFINITY);
  __m512 m0 = none, m1 = none;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i);
    const __m512 b = _mm512_loadu_ps(x + i + 16);
    // x > -inf is false for NaN too; those lanes keep the running maximum.
    m0 = _mm512_mask_max_ps(m0, _mm512_cmp_ps_mask(a, none, _CMP_GT_OQ), m0, _mm512_mul_ps(a, s));
    m1 = _mm512_mask_max_ps(m1, _mm512_cmp_ps_mask(b, none, _CMP_GT_OQ), m1, _mm512_mul_ps(b, s));
  }
  for (; i < n; i += 16) {
    const __mmask16 t = lanes_left(n, i);
    const __m512 a = _mm512_maskz_loadu_ps(t, x + i);
    m0 = _mm512_mask_max_ps(m0, _mm512_mask_cmp_ps_mask(t, a, none, _CMP_GT_OQ), m0, _mm512_mul_ps(a, s));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

double exp_weights_avx512(const float* x, size_t n, float scale, float shift, double floor, double* w) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 sh = _mm512_set1_ps(shift);
  const __m512 none = _mm512_set1_ps(-INFINITY);
  const __m512 least = _mm512_set1_ps(kLeastExpArgument);
  const __m512d f = _mm512_set1_pd(floor);
  __m512d sum0 = _mm512_setzero_pd(), sum1 = _mm512_setzero_pd();
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 t = lanes_left(n, i);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + i);
    const __m512 d = _mm512_sub_ps(_mm512_mul_ps(v, s), sh);
    // The lanes that get a weight: allowed tokens inside the row whose weight is not below the least
    // (tail lanes, -inf, NaN and underflow get 0). The rest take exp(least) instead, which keeps libmvec
    // off its scalar path for out-of-range lanes (a forbidden -inf in every lane of a grammar-masked row).
    const __mmask16 k =
        _mm512_mask_cmp_ps_mask(_mm512_mask_cmp_ps_mask(t, v, none, _CMP_GT_OQ), d, least, _CMP_GE_OQ);
    const __m512 dk = _mm512_mask_mov_ps(least, k, d);
    const __m512d e0 = _mm512_maskz_mov_pd(static_cast<__mmask8>(k),
                                           _ZGVeN8v_exp(_mm512_cvtps_pd(_mm512_castps512_ps256(dk))));
    const __m512d e1 = _mm512_maskz_mov_pd(static_cast<__mmask8>(k >> 8),
                                           _ZGVeN8v_exp(_mm512_cvtps_pd(_mm512_extractf32x8_ps(dk, 1))));
    _mm512_mask_storeu_pd(w + i, static_cast<__mmask8>(t), e0);
    _mm512_mask_storeu_pd(w + i + 8, static_cast<__mmask8>(t >> 8), e1);
    sum0 = _mm512_mask_add_pd(sum0, _mm512_cmp_pd_mask(e0, f, _CMP_GE_OQ), sum0, e0);
    sum1 = _mm512_mask_add_pd(sum1, _mm512_cmp_pd_mask(e1, f, _CMP_GE_OQ), sum1, e1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(sum0, sum1));
}

double exp_sum_avx512(const float* x, size_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  const __m512 none = _mm512_set1_ps(-INFINITY);
  const __m512 least = _mm512_set1_ps(kLeastExpfArgument);
  __m512d sum0 = _mm512_setzero_pd(), sum1 = _mm512_setzero_pd();
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 t = lanes_left(n, i);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + i);
    const __m512 d = _mm512_sub_ps(v, sh);
    // As in exp_weights: out-of-range lanes take exp(least) and are then dropped.
    const __mmask16 k =
        _mm512_mask_cmp_ps_mask(_mm512_mask_cmp_ps_mask(t, v, none, _CMP_GT_OQ), d, least, _CMP_GE_OQ);
    const __m512 e = _mm512_maskz_mov_ps(k, _ZGVeN16v_expf(_mm512_mask_mov_ps(least, k, d)));
    sum0 = _mm512_add_pd(sum0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum1 = _mm512_add_pd(sum1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(sum0, sum1));
}

void weight_bucket_masses_avx512(const double* w, size_t n, double floor, double* masses) {
  // The keys of 8 weights at once; the adds stay scalar (a scatter), into 4 partial tables so that a run of
  // weights in one bucket does not chain every add through one memory location.
  alignas(64) double lanes[4][kWeightBuckets] = {};
  alignas(64) int64_t key[8];
  alignas(64) double add[8];
  const __m512d f = _mm512_set1_pd(floor);
  const __m512i below_one_base = _mm512_set1_epi64(1023);
  const __m512i last = _mm512_set1_epi64(kWeightBuckets - 1);
  const __m512i fifteen = _mm512_set1_epi64(15);
  for (size_t i = 0; i < n; i += 8) {
    const __mmask8 t = n - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (n - i)) - 1);
    const __m512d v = _mm512_maskz_loadu_pd(t, w + i);
    const __m512i bits = _mm512_castpd_si512(v);
    const __m512i below_one = _mm512_sub_epi64(below_one_base, _mm512_srli_epi64(bits, 52));
    __m512i k = _mm512_sub_epi64(_mm512_add_epi64(_mm512_slli_epi64(below_one, 4), fifteen),
                                 _mm512_and_si512(_mm512_srli_epi64(bits, 48), fifteen));
    k = _mm512_min_epi64(_mm512_max_epi64(k, _mm512_setzero_si512()), last);
    _mm512_store_si512(key, k);
    _mm512_store_pd(add, _mm512_maskz_mov_pd(_mm512_mask_cmp_pd_mask(t, v, f, _CMP_GE_OQ), v));
    for (int j = 0; j < 8; ++j) lanes[j & 3][key[j]] += add[j];
  }
  for (int b = 0; b < kWeightBuckets; ++b)
    masses[b] += (lanes[0][b] + lanes[1][b]) + (lanes[2][b] + lanes[3][b]);
}

size_t ids_in_range_avx512(const double* w, size_t n, double lo, double hi, int32_t* ids) {
  const __m512d l = _mm512_set1_pd(lo);
  const __m512d h = _mm512_set1_pd(hi);
  __m256i id = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  size_t count = 0;
  for (size_t i = 0; i < n; i += 8, id = _mm256_add_epi32(id, step)) {
    const __mmask8 t = n - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (n - i)) - 1);
    const __m512d v = _mm512_maskz_loadu_pd(t, w + i);
    const __mmask8 m =
        _mm512_mask_cmp_pd_mask(_mm512_mask_cmp_pd_mask(t, v, l, _CMP_GE_OQ), v, h, _CMP_LT_OQ);
    if (m == 0) continue;  // the usual case: one bucket of a whole row
    const int k = __builtin_popcount(m);
    _mm256_mask_storeu_epi32(ids + count, static_cast<__mmask8>((1u << k) - 1),
                             _mm256_maskz_compress_epi32(m, id));
    count += static_cast<size_t>(k);
  }
  return count;
}

size_t pick_weight_avx512(const double* w, size_t n, double floor, double r) {
  // Blocks of 64 weights: a block whose kept sum does not exceed what is left of r is skipped whole.
  const __m512d f = _mm512_set1_pd(floor);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (size_t j = 0; j < 64; j += 16) {
      const __m512d a = _mm512_loadu_pd(w + i + j);
      const __m512d b = _mm512_loadu_pd(w + i + j + 8);
      s0 = _mm512_mask_add_pd(s0, _mm512_cmp_pd_mask(a, f, _CMP_GE_OQ), s0, a);
      s1 = _mm512_mask_add_pd(s1, _mm512_cmp_pd_mask(b, f, _CMP_GE_OQ), s1, b);
    }
    const double block = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    if (block > r) break;
    r -= block;
  }
  return pick_weight_from(w, n, floor, r, i);
}

}  // namespace spark::kernels
