// AVX-512 body of gemm_float (exact f32 products whatever the weight dtype).
//  - few rows (decode): 8 weight rows (one activation row) or 4 are streamed at a time (each stream on
//    through a run of the task's rows: RowPasses, cpu/decode_rows.h), widened in registers, and dotted with
//    every activation row while in registers; bound by memory bandwidth. bf16 rows are used in place as their
//    even and odd elements (bf16_split_rows): 1.3-1.6x the bytes per second of widening them. Small batches
//    (up to float_row_dots_max_m rows) run the same dots on chunks of at most 4 rows; the bf16 chunks ask for
//    the next run of weight rows as they go.
//  - many rows: panels widened to f32 once per K block, then the 12 x 32 micro-kernel (panel_avx512.h).
#include <immintrin.h>

#include <algorithm>

#include "cpu/decode_rows.h"
#include "cpu/lane_masks_avx512.h"
#include "cpu/unroll.h"
#include "gemm/activations.h"
#include "gemm_float/gemm_float_isa.h"
#include "gemm_float/panel_avx512.h"

namespace spark::kernels {

namespace {

template <FloatDType DT>
inline __m512 load16(const void* base, int64_t i, __mmask16 mask) {
  if constexpr (DT == FloatDType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(base) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + i);
    if constexpr (DT == FloatDType::kBF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// Rows [n_begin, n_end) of y for the M (<= 4) activation rows, R weight rows per pass: 8 at one activation
// row, else 4 (f32, f16; bf16 takes bf16_split_rows). The R rows are R streams (RowPasses: in decode each
// goes on through a run of rows), each asking for its lines ahead (prefetch_row_ahead).
template <FloatDType DT, int M, int R = 4>
void small_m_rows(const float* x, const FloatWeight& w, float* y, int64_t ldy, int64_t n_begin, int64_t n_end,
                  RowOrder order) {
  const int64_t k = w.k;
  const int64_t elem = float_dtype_size(DT);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const RowPasses passes = row_passes(n_begin, n_end, R, order);
  for (int64_t t = 0; t < passes.count(); ++t) {
    const int64_t n = passes.first(t), step = passes.step;
    const int rows = passes.rows(t);
    const void* wr[R];
    SPARK_UNROLL
    for (int r = 0; r < R; ++r) wr[r] = base + (n + std::min(r, rows - 1) * step) * k * elem;
    __m512 acc[M][R];
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
    }
    for (int64_t kk = 0; kk < k; kk += 16) {
      const __mmask16 mask = avx512::lanes_mask(k - kk);
      if ((kk * elem) % 64 == 0) {
        SPARK_UNROLL
        for (int r = 0; r < R; ++r) prefetch_row_ahead(wr[r], kk * elem, k * elem, passes.rows_skipped());
      }
      __m512 wv[R];
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) wv[r] = load16<DT>(wr[r], kk, mask);
      SPARK_UNROLL
      for (int i = 0; i < M; ++i) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * k + kk);
        SPARK_UNROLL
        for (int r = 0; r < R; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
      }
    }
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < rows; ++r) y[i * ldy + n + r * step] = _mm512_reduce_add_ps(acc[i][r]);
    }
  }
}

// x [m][k] -> per row its even elements, then its odd ones, each zero padded to k_half (>= ceil(k / 2), a
// multiple of 16), for bf16_split_rows. Lives in scratch slot 3 (slot 1 may hold x: gemm/dispatch.cpp's
// bf16_rounded).
const float* split_even_odd(const float* x, int64_t m, int64_t k, int64_t k_half) {
  auto* out = static_cast<float*>(scratch(3, static_cast<size_t>(m * 2 * k_half) * sizeof(float)));
  for (int64_t i = 0; i < m; ++i) {
    float* even = out + i * 2 * k_half;
    float* odd = even + k_half;
    for (int64_t j = 0; j < k_half; ++j) {
      even[j] = 2 * j < k ? x[i * k + 2 * j] : 0.0f;
      odd[j] = 2 * j + 1 < k ? x[i * k + 2 * j + 1] : 0.0f;
    }
  }
  return out;
}

// bf16 weights at decode, the f32 products exact as above, with fewer instructions per weight line: a
// 64-byte line of 32 bf16 becomes two f32 vectors in place, the even elements by a 16-bit shift and the
// odd ones by masking their low halves, so no widening shuffle. The activations are split once per call
// into their even and odd elements to match (xs: per row, k_half evens then k_half odds, zero padded).
// R weight rows a pass as in small_m_rows (8 at one activation row; at two, 8 were slower on the
// 2048-wide shapes: 16 accumulators and 16 split vectors outgrow the registers).
template <int M, int R = 4>
void bf16_split_rows(const float* xs, int64_t k_half, const FloatWeight& w, float* y, int64_t ldy,
                     int64_t n_begin, int64_t n_end, RowOrder order, PanelPrefetch pf = {}) {
  const int64_t k = w.k;
  const auto* base = static_cast<const uint16_t*>(w.data);
  const __m512i odd = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const RowPasses passes = row_passes(n_begin, n_end, R, order);
  for (int64_t t = 0; t < passes.count(); ++t) {
    const int64_t n = passes.first(t), step = passes.step;
    const int rows = passes.rows(t);
    const uint16_t* wr[R];
    SPARK_UNROLL
    for (int r = 0; r < R; ++r) wr[r] = base + (n + std::min(r, rows - 1) * step) * k;
    __m512 acc[M][R];
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
    }
    for (int64_t kk = 0; kk < k; kk += 32) {
      const __mmask32 mask = avx512::lanes_mask32(k - kk);
      prefetch_panel_step(pf.next, pf.end, pf.lines);
      __m512 we[R], wo[R];
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) {
        prefetch_row_ahead(wr[r], kk * 2, k * 2, passes.rows_skipped());
        const __m512i v = _mm512_maskz_loadu_epi16(mask, wr[r] + kk);
        we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        wo[r] = _mm512_castsi512_ps(_mm512_and_si512(v, odd));
      }
      SPARK_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = xs + i * 2 * k_half + kk / 2;
        const __m512 xe = _mm512_load_ps(xi), xo = _mm512_load_ps(xi + k_half);
        SPARK_UNROLL
        for (int r = 0; r < R; ++r)
          acc[i][r] = _mm512_fmadd_ps(xo, wo[r], _mm512_fmadd_ps(xe, we[r], acc[i][r]));
      }
    }
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < rows; ++r) y[i * ldy + n + r * step] = _mm512_reduce_add_ps(acc[i][r]);
    }
  }
}

// panel[kk * 32 + r] = W[n0 + r, k0 + kk] widened to f32: 16 x 16 tiles are loaded row by row and
// transposed in registers, so the panel is written in whole vectors.
template <FloatDType DT>
struct FloatPacker {
  const FloatWeight& w;
  void operator()(int64_t n0, int64_t k0, int64_t kc, float* panel) const {
    const int64_t elem = float_dtype_size(DT);
    const auto* base = static_cast<const uint8_t*>(w.data);
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t r0 = n0 + half * 16;
      const int64_t rows = std::clamp<int64_t>(w.n - r0, 0, 16);
      for (int64_t kk = 0; kk < kc; kk += 16) {
        const __mmask16 mask = avx512::lanes_mask(kc - kk);
        __m512 t[16];
        for (int64_t r = 0; r < 16; ++r) {
          t[r] = r < rows ? load16<DT>(base + ((r0 + r) * w.k + k0) * elem, kk, mask) : _mm512_setzero_ps();
        }
        avx512::transpose16x16(t);
        const int64_t len = std::min<int64_t>(16, kc - kk);
        for (int64_t j = 0; j < len; ++j)
          _mm512_store_ps(panel + (kk + j) * avx512::kPanelNr + half * 16, t[j]);
      }
    }
  }
};

template <FloatDType DT>
void gemm_typed(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy, ThreadPool& pool) {
  if (m > float_row_dots_max_m(DT, true)) {
    avx512::panel_gemm(x, m, w.k, w.n, w.k, y, ldy, pool, FloatPacker<DT>{w});
    return;
  }
  if constexpr (DT == FloatDType::kBF16) {
    const int64_t k_half = (w.k + 31) / 32 * 16;
    const float* xs = split_even_odd(x, m, w.k, k_half);
    run_row_dot_tasks(pool, m, w.n, [&](int64_t b, int64_t e) {
      if (m == 1) {
        bf16_split_rows<1, 8>(xs, k_half, w, y, ldy, b, e, RowOrder::kStrided);
      } else {
        row_dot_chunks(m, b, e, w.data, w.k * 2,
                       [&](int64_t i0, auto rows, int64_t n0, int64_t n1, auto pf, RowOrder order) {
                         bf16_split_rows<rows>(xs + i0 * 2 * k_half, k_half, w, y + i0 * ldy, ldy, n0, n1,
                                               order, pf);
                       });
      }
    });
  } else {
    run_row_dot_tasks(pool, m, w.n, [&](int64_t b, int64_t e) {
      if (m == 1) {
        small_m_rows<DT, 1, 8>(x, w, y, ldy, b, e, RowOrder::kStrided);
      } else {
        row_dot_chunks(m, b, e, nullptr, 0,
                       [&](int64_t i0, auto rows, int64_t n0, int64_t n1, PanelPrefetch, RowOrder order) {
                         small_m_rows<DT, rows>(x + i0 * w.k, w, y + i0 * ldy, ldy, n0, n1, order);
                       });
      }
    });
  }
}

}  // namespace

void gemm_float_avx512(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool) {
  switch (w.dtype) {
    case FloatDType::kF32:
      gemm_typed<FloatDType::kF32>(x, m, w, y, ldy, pool);
      break;
    case FloatDType::kBF16:
      gemm_typed<FloatDType::kBF16>(x, m, w, y, ldy, pool);
      break;
    case FloatDType::kF16:
      gemm_typed<FloatDType::kF16>(x, m, w, y, ldy, pool);
      break;
  }
}

}  // namespace spark::kernels
