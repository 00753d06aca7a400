#include <immintrin.h>

#include "attention/attention_isa.h"
#include "attention/tile.h"

namespace spark::kernels {

namespace {

struct V512 {
  using R = __m512;
  static constexpr int L = 16;
  static constexpr int kRegs = 32;  // vector registers (register blocking)
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  // 16 bf16 values widened to f32: each into the upper half of a 32-bit lane.
  static R load(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // 16 FP8 E4M3 values x 2^-8, widened to f32 exactly (how: tile.h, widen(uint8_t)); the kernels carry the
  // 2^8 in the other operand (tile.h, load_folded).
  static R load_fp8_over_256(const uint8_t* p) {
    const __m256i c = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtph_ps(
        _mm256_and_si256(_mm256_slli_epi16(c, 7), _mm256_set1_epi16(static_cast<short>(0xbfff))));
  }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float reduce(R x) { return _mm512_reduce_add_ps(x); }
  // Lane i of the result = the sum of x[i]'s lanes, for 16 vectors at once: pairs interleaved and added
  // within 128-bit lanes (twice), then the four 128-bit lanes transposed and added: 45 operations where
  // 16 reduce() calls take ~130.
  static R sum_lanes(const R* x) {
    R t1[8], t2[4];
    for (int i = 0; i < 8; ++i) {
      t1[i] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]),
                            _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]));
    }
    for (int i = 0; i < 4; ++i) {
      const __m512d a = _mm512_castps_pd(t1[2 * i]), b = _mm512_castps_pd(t1[2 * i + 1]);
      t2[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                            _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    // t2[i], 128-bit lane c: the sums over lane c's four elements of x[4i] .. x[4i + 3].
    const R v01 = _mm512_add_ps(_mm512_shuffle_f32x4(t2[0], t2[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_f32x4(t2[0], t2[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const R v23 = _mm512_add_ps(_mm512_shuffle_f32x4(t2[2], t2[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_f32x4(t2[2], t2[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Lane i of the result = lane (i + s) mod 16 of x.
  static R rotate(R x, int s) {
    const __m512i i = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_permutexvar_ps(
        _mm512_and_si512(_mm512_add_epi32(i, _mm512_set1_epi32(s)), _mm512_set1_epi32(15)), x);
  }
  // e^x: x = n ln2 + r, e^r by a degree-7 polynomial (Cephes expf), 2^n into the exponent field; 0 below
  // -87.3 (and for -inf). The same steps as the AVX2 body's, so both give the same values.
  static R exp(R x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    const R n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    R p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
  }
};

}  // namespace

bool attention_avx512_supports(int head_dim) {
  return head_dim > 0 && head_dim % V512::L == 0;
}

void attention_avx512(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool) {
  attention_tile::run<V512>(shape, tasks, pool);
}

}  // namespace spark::kernels
