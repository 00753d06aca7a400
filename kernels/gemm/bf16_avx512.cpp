// bf16 weights with activations rounded to bf16 (QuantizedWeight::bf16_activations), on AVX512-BF16:
// vdpbf16ps multiplies pairs of bf16 and adds both products into an f32 lane, twice the multiply-adds of
// an f32 FMA per instruction and no widening of the weights. The products of two bf16 are exact in f32;
// the error is the rounding of x to bf16 (relative 2^-9 per element), which the tests measure separately
// from the exact-f32 path.
//  - decode (m <= kBf16DotChunkRows): 8 or 4 weight rows at a time straight from the checkpoint layout,
//    each stream on through a run of the task's rows (RowPasses, cpu/decode_rows.h); small batches (up to
//    kBf16DotRowDotsMaxM rows) the same on chunks of at most kBf16DotChunkRows rows, which ask for the next
//    run of weight rows as they go (row_dot_chunks).
//  - prefill: panels of 32 rows x 256 k-pairs (16 x 16 blocks of pairs transposed in registers) and a
//    12 x 32 micro-kernel, through the same driver as the f32 panels.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/decode_rows.h"
#include "cpu/unroll.h"
#include "gemm/gemm_isa.h"
#include "gemm_float/panel_avx512.h"

namespace spark::kernels {

namespace {

// acc + a.even · b.even + a.odd · b.odd per lane (pairs of bf16 in 32-bit lanes).
inline __m512 dpbf16(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
}

// x [m][k] f32 -> [m][k2] pairs of bf16 (k2 = ceil(k / 2), the odd tail padded with zero), round to
// nearest even. Lives in scratch slot 1.
const uint32_t* activations_to_bf16(const float* x, int64_t m, int64_t k, int64_t k2) {
  auto* out = static_cast<uint32_t*>(scratch(1, static_cast<size_t>(m * k2) * 4));
  for (int64_t i = 0; i < m; ++i) {
    auto* row = reinterpret_cast<uint16_t*>(out + i * k2);
    for (int64_t kk = 0; kk < 2 * k2; kk += 32) {
      const __m512 lo = _mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk), x + i * k + kk);
      const __m512 hi = _mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk - 16), x + i * k + kk + 16);
      const __m512bh packed = _mm512_cvtne2ps_pbh(hi, lo);
      __m512i v;
      std::memcpy(&v, &packed, sizeof v);
      _mm512_mask_storeu_epi16(row + kk, avx512::lanes_mask32(2 * k2 - kk), v);
    }
  }
  return out;
}

template <int MR>
void bf16_micro(const uint32_t* x, int64_t ldx, const uint32_t* panel, int64_t kc, float* c, int64_t ldc,
                int64_t n_valid, bool accumulate) {
  __m512 acc[MR][2];
  SPARK_UNROLL
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < kc; ++kp) {
    const __m512i b0 = _mm512_load_si512(panel + kp * avx512::kPanelNr);
    const __m512i b1 = _mm512_load_si512(panel + kp * avx512::kPanelNr + 16);
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(x[i * ldx + kp]));
      acc[i][0] = dpbf16(acc[i][0], a, b0);
      acc[i][1] = dpbf16(acc[i][1], a, b1);
    }
  }
  const __mmask16 m0 = avx512::lanes_mask(n_valid), m1 = avx512::lanes_mask(n_valid - 16);
  SPARK_UNROLL
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, ci));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, ci + 16));
    }
    _mm512_mask_storeu_ps(ci, m0, acc[i][0]);
    _mm512_mask_storeu_ps(ci + 16, m1, acc[i][1]);
  }
}

using Bf16Micro = void (*)(const uint32_t*, int64_t, const uint32_t*, int64_t, float*, int64_t, int64_t,
                           bool);
constexpr Bf16Micro kBf16Micro[avx512::kPanelMr + 1] = {
    nullptr,       bf16_micro<1>, bf16_micro<2>, bf16_micro<3>,  bf16_micro<4>,  bf16_micro<5>, bf16_micro<6>,
    bf16_micro<7>, bf16_micro<8>, bf16_micro<9>, bf16_micro<10>, bf16_micro<11>, bf16_micro<12>};

// panel[kp * 32 + r] = the bf16 pair W[n0 + r, 2(k0 + kp)], W[n0 + r, 2(k0 + kp) + 1] (zero past K or N).
struct PairPacker {
  const FloatWeight& w;
  void operator()(int64_t n0, int64_t k0, int64_t kc, uint32_t* panel) const {
    const auto* base = static_cast<const uint16_t*>(w.data);
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t r0 = n0 + half * 16;
      const int64_t rows = std::clamp<int64_t>(w.n - r0, 0, 16);
      for (int64_t kp = 0; kp < kc; kp += 16) {
        const int64_t e0 = 2 * (k0 + kp);  // first bf16 element of this 16-pair column block
        const __mmask32 mask = avx512::lanes_mask32(std::min<int64_t>(w.k - e0, 2 * (kc - kp)));
        __m512 t[16];
        for (int64_t r = 0; r < 16; ++r) {
          t[r] = r < rows ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask, base + (r0 + r) * w.k + e0))
                          : _mm512_setzero_ps();
        }
        avx512::transpose16x16(t);
        const int64_t len = std::min<int64_t>(16, kc - kp);
        for (int64_t j = 0; j < len; ++j) {
          _mm512_store_ps(reinterpret_cast<float*>(panel + (kp + j) * avx512::kPanelNr + half * 16), t[j]);
        }
      }
    }
  }
};

// Rows [n_begin, n_end) for M (<= kBf16DotChunkRows) activation rows, R weight rows (streams) a pass: 8 at
// one or two activation rows, where the M x 8 accumulators still leave registers for the 8 weight lines;
// else 4 (6 x 4 accumulators, 4 weight lines and one activation vector: 29 of the 32 registers).
template <int M, int R = 4>
void small_m_rows(const uint32_t* xb, int64_t k2, const FloatWeight& w, float* y, int64_t ldy,
                  int64_t n_begin, int64_t n_end, RowOrder order, PanelPrefetch pf = {}) {
  const auto* base = static_cast<const uint16_t*>(w.data);
  const RowPasses passes = row_passes(n_begin, n_end, R, order);
  for (int64_t t = 0; t < passes.count(); ++t) {
    const int64_t n = passes.first(t), step = passes.step;
    const int rows = passes.rows(t);
    const uint16_t* wr[R];
    SPARK_UNROLL
    for (int r = 0; r < R; ++r) wr[r] = base + (n + std::min(r, rows - 1) * step) * w.k;
    __m512 acc[M][R];
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
    }
    for (int64_t kk = 0; kk < w.k; kk += 32) {
      const __mmask32 mask = avx512::lanes_mask32(w.k - kk);
      prefetch_panel_step(pf.next, pf.end, pf.lines);
      __m512i wv[R];
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) {
        prefetch_row_ahead(wr[r], kk * 2, w.k * 2, passes.rows_skipped());
        wv[r] = _mm512_maskz_loadu_epi16(mask, wr[r] + kk);
      }
      SPARK_UNROLL
      for (int i = 0; i < M; ++i) {
        const __m512i xv = _mm512_loadu_si512(xb + i * k2 + kk / 2);
        SPARK_UNROLL
        for (int r = 0; r < R; ++r) acc[i][r] = dpbf16(acc[i][r], xv, wv[r]);
      }
    }
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < rows; ++r) y[i * ldy + n + r * step] = _mm512_reduce_add_ps(acc[i][r]);
    }
  }
}

}  // namespace

void gemm_bf16dot_avx512(const float* x, int64_t m, const QuantizedWeight& qw, float* y, int64_t ldy,
                         ThreadPool& pool) {
  const FloatWeight w = qw.as_float();
  const int64_t k2 = (w.k + 1) / 2;
  // Rows are padded to a multiple of 16 pairs so the decode loop can read whole vectors.
  const int64_t ldx = (k2 + 15) / 16 * 16;
  const uint32_t* xb = activations_to_bf16(x, m, w.k, ldx);
  if (m <= kBf16DotRowDotsMaxM) {
    run_row_dot_tasks<kBf16DotChunkRows>(pool, m, w.n, [&](int64_t b, int64_t e) {
      if (m == 1) {
        small_m_rows<1, 8>(xb, ldx, w, y, ldy, b, e, RowOrder::kStrided);
      } else if (m == 2) {
        small_m_rows<2, 8>(xb, ldx, w, y, ldy, b, e, RowOrder::kStrided);
      } else {
        row_dot_chunks<kBf16DotChunkRows>(
            m, b, e, w.data, w.k * 2,
            [&](int64_t i0, auto rows, int64_t n0, int64_t n1, auto pf, RowOrder order) {
              small_m_rows<rows>(xb + i0 * ldx, ldx, w, y + i0 * ldy, ldy, n0, n1, order, pf);
            });
      }
    });
    return;
  }
  avx512::panel_gemm_with(xb, m, ldx, w.n, k2, y, ldy, pool, PairPacker{w}, kBf16Micro);
}

}  // namespace spark::kernels
