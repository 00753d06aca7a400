// AVX-512 VNNI kernels of the integer formats (kInt8, kW4A8). vpdpbusd multiplies unsigned by signed
// bytes and sums 4 products into an s32 lane without saturation:
//  - kInt8 feeds activations as q + 128 (unsigned) and weights as they are (signed), then subtracts
//    128 · Σ_k w[n, k] (the stored row sums): exact.
//  - kW4A8 feeds the weight nibble q in [0, 15] as the unsigned operand and activations as they are, then
//    subtracts 8 · Σ_group x (the activation group sums) for the zero point: exact, with no correction
//    stored in the weights.
// The f32 epilogues are written in the same order as gemm_ref's, so results match it bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/lane_masks_avx512.h"
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

struct Int8Kernel {
  static constexpr int kDecodeNb = 4;
  static constexpr int kPrefillMr = 8;
  static constexpr int kPrefillNb = 2;
  // One line a K step: at 8 rows a tile already reads its own panel at about one core's share of memory,
  // and two (the whole next panel in one tile) ran 0.8x on the 2048x6656 shape (session 29).
  static constexpr int kPanelPrefetchLines = 1;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    const QuantizedWeight& w = c.w;
    const int64_t bs = tile_block_stride<MR>(c);
    const int64_t block_bytes = w.k_pad * kBlockRows;
    const auto* wq = static_cast<const int8_t*>(w.qweight) + b0 * block_bytes;
    const int8_t* xq = c.a->q + m0 * c.a->k_pad;
    __m512i acc[MR][NB];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_setzero_si512();
    }
    PanelPrefetch pf = c.prefetch;
    for (int64_t kq = 0; kq < w.k_pad / 4; ++kq) {
      prefetch_panel_step(pf.next, pf.end, pf.lines);
      __m512i wv[NB];
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) {
        if constexpr (MR <= kDecodeMaxM)
          prefetch_line(wq + b * bs * block_bytes + (kq + kDecodePrefetchLines) * 64);
        wv[b] = _mm512_loadu_si512(wq + b * bs * block_bytes + kq * 64);
      }
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
      const int64_t n0 = (b0 + b * bs) * kBlockRows;
      const __mmask16 mask = avx512::lanes_mask(w.n - n0);
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

// acc + Σ4 u8(a) · s8(*x broadcast) per lane: the activation bytes come straight from memory (embedded
// broadcast), so a row costs no separate broadcast instruction.
inline __m512i dpbusd_bcst(__m512i acc, __m512i a, const int8_t* x) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*reinterpret_cast<const int32_t*>(x)));
  return acc;
}

// kW4A8 tiles. Decode (MR <= 4 rows x 4 blocks) and batches / prefill (up to 12 rows x 2 blocks: 24
// accumulators, 4 unpacked lines and the nibble mask fill the 32 registers, so every unpacked line feeds
// 12 rows, i.e. 24 vpdpbusd per line pair and no broadcast instructions). Each group's accumulators start
// at -8 · Σ_group x (the zero point), and the f32 sums live in memory between groups.
struct W4A8Kernel {
  static constexpr int kDecodeNb = 4;
  static constexpr int kPrefillMr = 12;
  static constexpr int kPrefillNb = 2;
  static constexpr int kPanelPrefetchLines = 2;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t bs = tile_block_stride<MR>(c);
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const int64_t ldq = c.a->k_pad;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* sc = static_cast<const uint16_t*>(w.scales) + b0 * groups * kBlockRows;
    const int8_t* xq = c.a->q + m0 * ldq;
    const int32_t* zbias = c.a->group_sums + m0 * groups;  // -8 · Σ_group q (see gemm_w4a8_avx512)
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    alignas(64) float out[MR][NB][kBlockRows] = {};
    PanelPrefetch pf = c.prefetch;
    for (int64_t g = 0; g < groups; ++g) {
      __m512i acc[MR][NB];
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512i z = _mm512_set1_epi32(zbias[i * groups + g]);
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) acc[i][b] = z;
      }
      if constexpr (MR <= kDecodeMaxM) prefetch_next_group<NB>(sc, groups, kBlockRows, g, bs);
      // 16 lines of 64 bytes per group and block; line p holds k = 8p..8p+3 (low) and 8p+4..8p+7 (high).
      const uint8_t* wl = wq + g * (kGroupSize / 8) * 64;
      const int8_t* xg = xq + g * kGroupSize;
      for (int64_t p = 0; p < kGroupSize / 8; ++p) {
        prefetch_panel_step(pf.next, pf.end, pf.lines);
        __m512i lo[NB], hi[NB];
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) {
          if constexpr (MR <= kDecodeMaxM)
            prefetch_line(wl + b * bs * block_bytes + (p + kDecodePrefetchLines) * 64);
          const __m512i raw = _mm512_loadu_si512(wl + b * bs * block_bytes + p * 64);
          lo[b] = _mm512_and_si512(raw, low4);
          hi[b] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        }
        if constexpr (MR == 1) {
          // One row: its two activation words broadcast once for all NB blocks, not once per block.
          int32_t x_lo, x_hi;
          std::memcpy(&x_lo, xg + p * 8, 4);
          std::memcpy(&x_hi, xg + p * 8 + 4, 4);
          const __m512i xl = _mm512_set1_epi32(x_lo), xh = _mm512_set1_epi32(x_hi);
          SPARK_UNROLL
          for (int b = 0; b < NB; ++b) {
            acc[0][b] = dpbusd(acc[0][b], lo[b], xl);
            acc[0][b] = dpbusd(acc[0][b], hi[b], xh);
          }
        } else {
          SPARK_UNROLL
          for (int i = 0; i < MR; ++i) {
            const int8_t* xp = xg + i * ldq + p * 8;
            SPARK_UNROLL
            for (int b = 0; b < NB; ++b) {
              acc[i][b] = dpbusd_bcst(acc[i][b], lo[b], xp);
              acc[i][b] = dpbusd_bcst(acc[i][b], hi[b], xp + 4);
            }
          }
        }
      }
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) {
        const __m512 s = _mm512_cvtph_ps(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + (b * bs * groups + g) * kBlockRows)));
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          const __m512 o = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][b]), s, _mm512_load_ps(out[i][b]));
          _mm512_store_ps(out[i][b], o);
        }
      }
    }
    SPARK_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int64_t n0 = (b0 + b * bs) * kBlockRows;
      const __mmask16 mask = avx512::lanes_mask(w.n - n0);
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512 v = _mm512_mul_ps(_mm512_load_ps(out[i][b]), _mm512_set1_ps(c.a->scale[m0 + i]));
        _mm512_mask_storeu_ps(c.y + (m0 + i) * c.ldy + n0, mask, v);
      }
    }
  }
};

}  // namespace

// quantize_row (activations.cpp) 16 lanes at a time, with the same result bit for bit: max|x| is exact in
// any order (a NaN is skipped as std::max skips it), and the product, round-half-even and clamp are the
// same IEEE operations (vmaxps / vminps return their second operand for a NaN, as fmax / fmin do).
void quantize_row_avx512(const float* x, int64_t k, int64_t k_pad, int64_t groups, bool offset128, int8_t* q,
                         float* scale, int32_t* group_sums) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 vmax = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(avx512::lanes_mask(k - i), x + i);
    vmax = _mm512_max_ps(_mm512_andnot_ps(sign, v), vmax);
  }
  const float amax = _mm512_reduce_max_ps(vmax);
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m128i bias = _mm_set1_epi8(offset128 ? static_cast<char>(0x80) : 0);
  for (int64_t g = 0; g * 128 < k || g < groups; ++g) {
    __m512i sum = _mm512_setzero_si512();
    for (int64_t i = g * 128; i < std::min(k, (g + 1) * 128); i += 16) {
      const __mmask16 mask = avx512::lanes_mask(k - i);
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), vinv);
      const __m512 r = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i qi = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi));
      sum = _mm512_add_epi32(sum, _mm512_maskz_mov_epi32(mask, qi));
      _mm_mask_storeu_epi8(q + i, mask, _mm_xor_si128(_mm512_cvtepi32_epi8(qi), bias));
    }
    if (g < groups) group_sums[g] = _mm512_reduce_add_epi32(sum);
  }
  std::memset(q + k, offset128 ? 0x80 : 0, static_cast<size_t>(k_pad - k));
}

void gemm_int8_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                      ThreadPool& pool) {
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/true, &pool, 1, quantize_row_avx512);
  run_tiles<Int8Kernel>(TileContext{w, &a, x, w.k, nullptr, y, ldy, {}}, m, pool);
}

void gemm_w4a8_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                      ThreadPool& pool) {
  const int64_t groups = w.groups();
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, groups, /*offset128=*/false, &pool, 1, quantize_row_avx512);
  // The tiles start each group's sums at the zero point's share, -8 · Σ_group q (this call's scratch).
  for (int64_t i = 0; i < m * groups; ++i) a.group_sums[i] *= -8;
  run_tiles<W4A8Kernel>(TileContext{w, &a, x, w.k, nullptr, y, ldy, {}}, m, pool);
}

}  // namespace spark::kernels
