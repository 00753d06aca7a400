// AVX512-BF16 kernels of kW4A16 (w = q · scale + min per group of 128, activations rounded to bf16).
// vdpbf16ps takes 32 bf16 products per instruction, twice an f32 FMA, and the nibbles become bf16 with
// integer ops instead of a float lookup per weight:
//  - 16 bytes of the layout hold one k pair of 16 rows; a 64-byte line holds 4 pairs (8 k). One vpermb
//    gathers row r's 4 bytes into 32-bit lane r, so the lane holds that row's 8 nibbles in k order; a
//    shift moves nibbles j and j + 4 to mantissa bits 3-6 of the lane's two words and one vpternlogd masks
//    them and ORs in the exponent of 1.0, which gives the bf16 of 1 + q / 16 (exact). Each line becomes
//    4 operands of vdpbf16ps whose word pairs are the k pairs (0, 4), (1, 5), (2, 6), (3, 7); the
//    activations are laid out in that order once per call.
//  - per group: D = Σ x · (1 + q/16), so Σ x · q = 16·D - 16·Σ x and y += 16·scale · D + (min - 16·scale)
//    · Σ x. The offset 16 (the smallest an implicit leading 1 allows) costs ~2^-20 relative rounding,
//    far below the 2^-9 of rounding x to bf16.
//  - the same tiles serve prefill (8 activation rows x 2 blocks): each line is unpacked once per 8 rows
//    instead of being dequantized to f32 panels, and the products run at bf16 rate.
#include <immintrin.h>

#include <cstring>

#include "cpu/unroll.h"
#include "gemm/bf16_round_avx512.h"
#include "gemm/gemm_isa.h"
#include "gemm/tile_driver.h"
#include "gemm_float/panel_avx512.h"

namespace spark::kernels {

namespace {

// acc + Σ2 bf16(w) · bf16(*x broadcast) per lane. Through asm for the embedded broadcast and so that GCC
// keeps the accumulator in its register (see dpbusd in int_avx512.cpp).
inline __m512 dpbf16_bcst(__m512 acc, __m512i w, const uint32_t* x) {
  __asm__("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
  return acc;
}

struct Unpacker {
  __m512i rows, mask, one;
  Unpacker() : rows(transpose()), mask(_mm512_set1_epi32(0x00780078)), one(_mm512_set1_epi32(0x3f803f80)) {}

  // vpermb indices: lane r <- row r of pairs 0-3 (bytes r, 16 + r, 32 + r, 48 + r), so lane r holds
  // row r's 8 nibbles in k order.
  static __m512i transpose() {
    alignas(64) uint8_t v[64];
    for (int r = 0; r < 16; ++r) {
      for (int p = 0; p < 4; ++p) v[4 * r + p] = static_cast<uint8_t>(16 * p + r);
    }
    return _mm512_load_si512(v);
  }

  // (v & mask) | one
  __m512i bf16(__m512i v) const { return _mm512_ternarylogic_epi32(v, mask, one, 0xea); }

  // One 64-byte line (8 k of 16 rows) -> the 4 vdpbf16ps operands: nibble j of a lane to bits 3-6, nibble
  // j + 4 to bits 19-22. One vpermb and 4 shifts per line, where splitting the pairs took 2 vpermb (or
  // 2 vpermq + 2 vpshufb) and the same shifts: 1.1-1.3x the lines per second with the weights in L2 at
  // 1, 3 and 4 activation rows (bench/RESULTS.md, session 27).
  void line(const uint8_t* src, __m512i out[4]) const {
    const __m512i d = _mm512_permutexvar_epi8(rows, _mm512_loadu_si512(src));
    out[0] = bf16(_mm512_slli_epi32(d, 3));
    out[1] = bf16(_mm512_srli_epi32(d, 1));
    out[2] = bf16(_mm512_srli_epi32(d, 5));
    out[3] = bf16(_mm512_srli_epi32(d, 9));
  }
};

constexpr int64_t kLinesPerGroup = kGroupSize / 8;

struct W4A16Bf16Kernel {
  static constexpr int kDecodeNb = 4;
  static constexpr int kPrefillMr = 8;
  static constexpr int kPrefillNb = 2;
  static constexpr int kPanelPrefetchLines = 2;

  // c.x points at the bf16 pairs (uint32 per pair, c.ldx pairs per row), c.x_group_sums at Σ x per group.
  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    // Independent vdpbf16ps chains per output vector, so one activation row is not latency-bound.
    constexpr int C = MR == 1 ? 4 : (MR == 2 ? 2 : 1);
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t bs = tile_block_stride<MR>(c);
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* params = static_cast<const uint16_t*>(w.scales) + b0 * groups * 2 * kBlockRows;
    const auto* xb = reinterpret_cast<const uint32_t*>(c.x) + m0 * c.ldx;
    const float* xsum = c.x_group_sums + m0 * groups;
    const Unpacker u;
    // Outputs live in memory between groups: with MR x NB x C accumulators, the register file is full.
    alignas(64) float out[MR][NB][kBlockRows] = {};
    PanelPrefetch pf = c.prefetch;
    for (int64_t g = 0; g < groups; ++g) {
      __m512 acc[MR][NB][C];
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) {
          SPARK_UNROLL
          for (int t = 0; t < C; ++t) acc[i][b][t] = _mm512_setzero_ps();
        }
      }
      if constexpr (MR <= kDecodeMaxM) prefetch_next_group<NB>(params, groups, 2 * kBlockRows, g, bs);
      for (int64_t l = g * kLinesPerGroup; l < (g + 1) * kLinesPerGroup; ++l) {
        prefetch_panel_step(pf.next, pf.end, pf.lines);
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) {
          // Decode streams each block once: the unpacking between loads otherwise leaves too few
          // misses in flight to fill the memory bandwidth.
          if constexpr (MR <= kDecodeMaxM)
            prefetch_line(wq + b * bs * block_bytes + (l + kDecodePrefetchLines) * 64);
          __m512i wv[4];
          u.line(wq + b * bs * block_bytes + l * 64, wv);
          SPARK_UNROLL
          for (int i = 0; i < MR; ++i) {
            const uint32_t* xp = xb + i * c.ldx + l * 4;
            SPARK_UNROLL
            for (int t = 0; t < 4; ++t) acc[i][b][t % C] = dpbf16_bcst(acc[i][b][t % C], wv[t], xp + t);
          }
        }
      }
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) {
        const uint16_t* pg = params + (b * bs * groups + g) * 2 * kBlockRows;
        const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg)));
        const __m512 mn =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + kBlockRows)));
        const __m512 s16 = _mm512_mul_ps(s, _mm512_set1_ps(16.0f));
        const __m512 mn16 = _mm512_sub_ps(mn, s16);
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          __m512 d = acc[i][b][0];
          SPARK_UNROLL
          for (int t = 1; t < C; ++t) d = _mm512_add_ps(d, acc[i][b][t]);
          __m512 o = _mm512_load_ps(out[i][b]);
          o = _mm512_fmadd_ps(s16, d, o);
          o = _mm512_fmadd_ps(mn16, _mm512_set1_ps(xsum[i * groups + g]), o);
          _mm512_store_ps(out[i][b], o);
        }
      }
    }
    SPARK_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int64_t n0 = (b0 + b * bs) * kBlockRows;
      const __mmask16 mask = avx512::lanes_mask(w.n - n0);
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i)
        _mm512_mask_storeu_ps(c.y + (m0 + i) * c.ldy + n0, mask, _mm512_load_ps(out[i][b]));
    }
  }
};

// Activation rows [i_begin, i_end) -> bf16 pairs in the kernel's order (k 0,2 | 1,3 | 4,6 | 5,7 of each 8)
// and Σ over each group of the rounded values.
void prepare_rows(const float* x, int64_t k, int64_t k_pad, int64_t groups, uint32_t* xb, float* xsum,
                  int64_t i_begin, int64_t i_end) {
  // Word j of 32 (4 units of 8 k) <- element 8(j / 8) + order[j % 8]; the bf16 of element e is word 2e + 1
  // of the rounded pair (a, b) of 16-lane vectors.
  alignas(64) int16_t idx[32];
  constexpr int kOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int j = 0; j < 32; ++j) idx[j] = static_cast<int16_t>(2 * (8 * (j / 8) + kOrder[j % 8]) + 1);
  const __m512i perm = _mm512_load_si512(idx);
  for (int64_t i = i_begin; i < i_end; ++i) {
    const float* xr = x + i * k;
    for (int64_t g = 0; g < groups; ++g) {
      __m512 sum = _mm512_setzero_ps();
      for (int64_t kk = g * kGroupSize; kk < (g + 1) * kGroupSize; kk += 32) {
        const __m512i a = round_to_bf16(_mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk), xr + kk));
        const __m512i b = round_to_bf16(_mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk - 16), xr + kk + 16));
        sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b)));
        _mm512_storeu_si512(xb + i * (k_pad / 2) + kk / 2, _mm512_permutex2var_epi16(a, perm, b));
      }
      xsum[i * groups + g] = _mm512_reduce_add_ps(sum);
    }
  }
}

}  // namespace

void gemm_w4a16_bf16_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                            ThreadPool& pool) {
  const int64_t groups = w.groups(), ldxb = w.k_pad / 2;
  auto* xb = static_cast<uint32_t*>(scratch(1, static_cast<size_t>(m * ldxb) * sizeof(uint32_t)));
  auto* xsum = static_cast<float*>(scratch(2, static_cast<size_t>(m * groups) * sizeof(float)));
  if (m <= kDecodeMaxM) {
    prepare_rows(x, w.k, w.k_pad, groups, xb, xsum, 0, m);
  } else {
    pool.parallel_for(static_cast<size_t>(m), 16, [&](size_t begin, size_t end) {
      prepare_rows(x, w.k, w.k_pad, groups, xb, xsum, static_cast<int64_t>(begin), static_cast<int64_t>(end));
    });
  }
  run_tiles<W4A16Bf16Kernel>(
      TileContext{w, nullptr, reinterpret_cast<const float*>(xb), ldxb, xsum, y, ldy, {}}, m, pool);
}

}  // namespace spark::kernels
