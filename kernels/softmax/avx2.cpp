#include <immintrin.h>

#include <cmath>

#include "softmax/softmax.h"
#include "softmax/softmax_isa.h"

// glibc libmvec: exp on 4 doubles (the x86-64 vector ABI name for AVX2).
extern "C" __m256d _ZGVdN4v_exp(__m256d x);
// ... and expf on 8 floats.
extern "C" __m256 _ZGVdN8v_expf(__m256 x);

namespace spark::kernels {

namespace {

// All-ones in the lanes still inside the row: the tail loads zeros past n and stores nothing there.
inline __m256i lanes_left(size_t n, size_t i) {
  const int left = n - i >= 8 ? 8 : static_cast<int>(n - i);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace

size_t argmax_avx2(const float* x, size_t n) {
  // The maximum, then the first lane equal to it: two passes that stream, against a scalar loop whose
  // every compare waits on the last.
  const float m = scaled_max_avx2(x, n, 1.0f);
  if (!(m > -INFINITY)) return 0;
  const __m256 mv = _mm256_set1_ps(m);
  for (size_t i = 0; i < n; i += 8) {
    const __m256i t = lanes_left(n, i);
    const __m256 eq =
        _mm256_and_ps(_mm256_cmp_ps(_mm256_maskload_ps(x + i, t), mv, _CMP_EQ_OQ), _mm256_castsi256_ps(t));
    const int bits = _mm256_movemask_ps(eq);
    if (bits != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(bits)));
  }
  return 0;
}

float scaled_max_avx2(const float* x, size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 none = _mm256_set1_ps(-INFINITY);
  __m256 m = none;
  for (size_t i = 0; i < n; i += 8) {
    const __m256i t = lanes_left(n, i);
    const __m256 a = _mm256_maskload_ps(x + i, t);
    // x > -inf is false for NaN and for the lanes past n; those keep the running maximum.
    const __m256 keep = _mm256_and_ps(_mm256_cmp_ps(a, none, _CMP_GT_OQ), _mm256_castsi256_ps(t));
    m = _mm256_blendv_ps(m, _mm256_max_ps(m, _mm256_mul_ps(a, s)), keep);
  }
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

double exp_weights_avx2(const float* x, size_t n, float scale, float shift, double floor, double* w) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 sh = _mm256_set1_ps(shift);
  const __m256 none = _mm256_set1_ps(-INFINITY);
  const __m256 least = _mm256_set1_ps(kLeastExpArgument);
  const __m256d f = _mm256_set1_pd(floor);
  __m256d sum0 = _mm256_setzero_pd(), sum1 = _mm256_setzero_pd();
  for (size_t i = 0; i < n; i += 8) {
    const __m256i t = lanes_left(n, i);
    const __m256 v = _mm256_maskload_ps(x + i, t);
    const __m256 d = _mm256_sub_ps(_mm256_mul_ps(v, s), sh);
    // The lanes that get a weight: allowed tokens inside the row whose weight is not below the least
    // (tail lanes, -inf, NaN and underflow get 0). The rest take exp(least) instead, which keeps libmvec
    // off its scalar path for out-of-range lanes (a forbidden -inf in every lane of a grammar-masked row).
    const __m256 k = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(v, none, _CMP_GT_OQ), _mm256_castsi256_ps(t)),
                                   _mm256_cmp_ps(d, least, _CMP_GE_OQ));
    const __m256 dk = _mm256_blendv_ps(least, d, k);
    // Each float lane's mask widened to its double lane.
    const __m256d k0 =
        _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(_mm256_castps256_ps128(k))));
    const __m256d k1 =
        _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(_mm256_extractf128_ps(k, 1))));
    const __m256d e0 = _mm256_and_pd(k0, _ZGVdN4v_exp(_mm256_cvtps_pd(_mm256_castps256_ps128(dk))));
    const __m256d e1 = _mm256_and_pd(k1, _ZGVdN4v_exp(_mm256_cvtps_pd(_mm256_extractf128_ps(dk, 1))));
    const __m256i t0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(t));
    const __m256i t1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(t, 1));
    _mm256_maskstore_pd(w + i, t0, e0);
    _mm256_maskstore_pd(w + i + 4, t1, e1);
    sum0 = _mm256_add_pd(sum0, _mm256_and_pd(_mm256_cmp_pd(e0, f, _CMP_GE_OQ), e0));
    sum1 = _mm256_add_pd(sum1, _mm256_and_pd(_mm256_cmp_pd(e1, f, _CMP_GE_OQ), e1));
  }
  const __m256d s4 = _mm256_add_pd(sum0, sum1);
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

double exp_sum_avx2(const float* x, size_t n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  const __m256 none = _mm256_set1_ps(-INFINITY);
  const __m256 least = _mm256_set1_ps(kLeastExpfArgument);
  __m256d sum0 = _mm256_setzero_pd(), sum1 = _mm256_setzero_pd();
  for (size_t i = 0; i < n; i += 8) {
    const __m256i t = lanes_left(n, i);
    const __m256 v = _mm256_maskload_ps(x + i, t);
    const __m256 d = _mm256_sub_ps(v, sh);
    // As in exp_weights: out-of-range lanes take exp(least) and are then dropped.
    const __m256 k = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(v, none, _CMP_GT_OQ), _mm256_castsi256_ps(t)),
                                   _mm256_cmp_ps(d, least, _CMP_GE_OQ));
    const __m256 e = _mm256_and_ps(k, _ZGVdN8v_expf(_mm256_blendv_ps(least, d, k)));
    sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  const __m256d s4 = _mm256_add_pd(sum0, sum1);
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

void weight_bucket_masses_avx2(const double* w, size_t n, double floor, double* masses) {
  // The keys of 4 weights at once; the adds stay scalar (a scatter), into 4 partial tables so that a run of
  // weights in one bucket does not chain every add through one memory location.
  alignas(32) double lanes[4][kWeightBuckets] = {};
  alignas(32) int64_t key[4];
  alignas(32) double add[4];
  const __m256d f = _mm256_set1_pd(floor);
  const __m256i below_one_base = _mm256_set1_epi64x(1023);
  const __m256i last = _mm256_set1_epi64x(kWeightBuckets - 1);
  const __m256i fifteen = _mm256_set1_epi64x(15);
  const __m256i zero = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += 4) {
    const int left = n - i >= 4 ? 4 : static_cast<int>(n - i);
    const __m256i t = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), _mm256_setr_epi64x(0, 1, 2, 3));
    const __m256d v = _mm256_maskload_pd(w + i, t);
    const __m256i bits = _mm256_castpd_si256(v);
    const __m256i below_one = _mm256_sub_epi64(below_one_base, _mm256_srli_epi64(bits, 52));
    __m256i k = _mm256_sub_epi64(_mm256_add_epi64(_mm256_slli_epi64(below_one, 4), fifteen),
                                 _mm256_and_si256(_mm256_srli_epi64(bits, 48), fifteen));
    k = _mm256_blendv_epi8(k, zero, _mm256_cmpgt_epi64(zero, k));
    k = _mm256_blendv_epi8(k, last, _mm256_cmpgt_epi64(k, last));
    _mm256_store_si256(reinterpret_cast<__m256i*>(key), k);
    const __m256d keep = _mm256_and_pd(_mm256_cmp_pd(v, f, _CMP_GE_OQ), _mm256_castsi256_pd(t));
    _mm256_store_pd(add, _mm256_and_pd(keep, v));
    for (int j = 0; j < 4; ++j) lanes[j][key[j]] += add[j];
  }
  for (int b = 0; b < kWeightBuckets; ++b)
    masses[b] += (lanes[0][b] + lanes[1][b]) + (lanes[2][b] + lanes[3][b]);
}

size_t ids_in_range_avx2(const double* w, size_t n, double lo, double hi, int32_t* ids) {
  const __m256d l = _mm256_set1_pd(lo);
  const __m256d h = _mm256_set1_pd(hi);
  size_t count = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d v = _mm256_loadu_pd(w + i);
    int m =
        _mm256_movemask_pd(_mm256_and_pd(_mm256_cmp_pd(v, l, _CMP_GE_OQ), _mm256_cmp_pd(v, h, _CMP_LT_OQ)));
    while (m != 0) {  // rare: one bucket of a whole row
      ids[count++] = static_cast<int32_t>(i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(m))));
      m &= m - 1;
    }
  }
  for (; i < n; ++i) {
    if (w[i] >= lo && w[i] < hi) ids[count++] = static_cast<int32_t>(i);
  }
  return count;
}

size_t pick_weight_avx2(const double* w, size_t n, double floor, double r) {
  // Blocks of 32 weights: a block whose kept sum does not exceed what is left of r is skipped whole.
  const __m256d f = _mm256_set1_pd(floor);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t j = 0; j < 32; j += 8) {
      const __m256d a = _mm256_loadu_pd(w + i + j);
      const __m256d b = _mm256_loadu_pd(w + i + j + 4);
      s0 = _mm256_add_pd(s0, _mm256_and_pd(_mm256_cmp_pd(a, f, _CMP_GE_OQ), a));
      s1 = _mm256_add_pd(s1, _mm256_and_pd(_mm256_cmp_pd(b, f, _CMP_GE_OQ), b));
    }
    const __m256d s4 = _mm256_add_pd(s0, s1);
    const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
    const double block = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    if (block > r) break;
    r -= block;
  }
  return pick_weight_from(w, n, floor, r, i);
}

}  // namespace spark::kernels
