// AVX-512 VNNI kernels of the integer formats (kInt8, kW4A8). vpdpbusd multiplies unsigned by signed
// bytes and sums 4 products into an s32 lane without saturation:
//  - kInt8 feeds activations as q + 128 (unsigned) and weights as they are (signed), then subtracts
//    128 · Σ_k w[n, k] (the stored row sums): exact.
//  - kW4A8 feeds the weight nibble q in [0, 15] as the unsigned operand and activations as they are, then
//    subtracts 8 · Σ_group x (the activation group sums) for the zero point: exact, with no correction
//    stored in the weights.
// The f32 epilogues are written in the same order as gemm_ref's, so results match it bit for bit.
#include <immintrin.h>

#include <cstring>

#include "cpu/unroll.h"
#include "gemm/gemm_isa.h"
#include "gemm/tile_driver.h"

namespace spark::kernels {

namespace {

inline __m512i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc + Σ4 u8(a) · s8(b) per lane. Through asm: GCC 12 allocates the tied accumulator operand of
// _mm512_dpbusd_epi32 apart from the loop-carried value and copies it in and out around every instruction
// (two moves per vpdpbusd in an 8 x 2 tile, even with the tile loops unrolled early).
inline __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

inline __mmask16 lane_mask(int64_t valid) {
  if (valid <= 0) return 0;
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1);
}

struct Int8Kernel {
  static constexpr int kDecodeNb = 4;
  static constexpr int kPrefillMr = 8;
  static constexpr int kPrefillNb = 2;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    const QuantizedWeight& w = c.w;
    const int64_t block_bytes = w.k_pad * kBlockRows;
    const auto* wq = static_cast<const int8_t*>(w.qweight) + b0 * block_bytes;
    const int8_t* xq = c.a->q + m0 * c.a->k_pad;
    __m512i acc[MR][NB];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_setzero_si512();
    }
    for (int64_t kq = 0; kq < w.k_pad / 4; ++kq) {
      __m512i wv[NB];
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) wv[b] = _mm512_loadu_si512(wq + b * block_bytes + kq * 64);
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512i xv = broadcast4(xq + i * c.a->k_pad + kq * 4);
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) acc[i][b] = dpbusd(acc[i][b], xv, wv[b]);
      }
    }
    const auto* scales = static_cast<const float*>(w.scales);
    SPARK_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int64_t n0 = (b0 + b) * kBlockRows;
      const __mmask16 mask = lane_mask(w.n - n0);
      const __m512i comp = _mm512_slli_epi32(_mm512_loadu_si512(w.row_sums + n0), 7);
      const __m512 sv = _mm512_loadu_ps(scales + n0);
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][b], comp)), sv);
        v = _mm512_mul_ps(v, _mm512_set1_ps(c.a->scale[m0 + i]));
        _mm512_mask_storeu_ps(c.y + (m0 + i) * c.ldy + n0, mask, v);
      }
    }
  }
};

struct W4A8Kernel {
  static constexpr int kDecodeNb = 4;
  static constexpr int kPrefillMr = 8;
  static constexpr int kPrefillNb = 2;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* sc = static_cast<const uint16_t*>(w.scales) + b0 * groups * kBlockRows;
    const int8_t* xq = c.a->q + m0 * c.a->k_pad;
    const int32_t* gsum = c.a->group_sums + m0 * groups;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 facc[MR][NB];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) facc[i][b] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < groups; ++g) {
      __m512i acc[MR][NB];
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_setzero_si512();
      }
      // 16 lines of 64 bytes per group and block; line p holds k = 8p..8p+3 (low) and 8p+4..8p+7 (high).
      for (int64_t p = 0; p < kGroupSize / 8; ++p) {
        __m512i lo[NB], hi[NB];
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) {
          const __m512i raw = _mm512_loadu_si512(wq + b * block_bytes + (g * (kGroupSize / 8) + p) * 64);
          lo[b] = _mm512_and_si512(raw, low4);
          hi[b] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        }
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          const int8_t* xp = xq + i * c.a->k_pad + g * kGroupSize + p * 8;
          const __m512i x0 = broadcast4(xp), x1 = broadcast4(xp + 4);
          SPARK_UNROLL
          for (int b = 0; b < NB; ++b) {
            acc[i][b] = dpbusd(acc[i][b], lo[b], x0);
            acc[i][b] = dpbusd(acc[i][b], hi[b], x1);
          }
        }
      }
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) {
        const __m512 s = _mm512_cvtph_ps(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + (b * groups + g) * kBlockRows)));
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          const __m512i corr = _mm512_sub_epi32(acc[i][b], _mm512_set1_epi32(8 * gsum[i * groups + g]));
          facc[i][b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(corr), s, facc[i][b]);
        }
      }
    }
    SPARK_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int64_t n0 = (b0 + b) * kBlockRows;
      const __mmask16 mask = lane_mask(w.n - n0);
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512 v = _mm512_mul_ps(facc[i][b], _mm512_set1_ps(c.a->scale[m0 + i]));
        _mm512_mask_storeu_ps(c.y + (m0 + i) * c.ldy + n0, mask, v);
      }
    }
  }
};

}  // namespace

void gemm_int8_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                      ThreadPool& pool) {
  const QuantizedActivations a = quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/true, &pool);
  run_tiles<Int8Kernel>(TileContext{w, &a, x, w.k, nullptr, y, ldy}, m, pool);
}

void gemm_w4a8_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                      ThreadPool& pool) {
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, w.groups(), /*offset128=*/false, &pool);
  run_tiles<W4A8Kernel>(TileContext{w, &a, x, w.k, nullptr, y, ldy}, m, pool);
}

}  // namespace spark::kernels
