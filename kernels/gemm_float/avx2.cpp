// AVX2 + FMA body of gemm_float. Two shapes of work:
//  - few rows (decode): each weight row is streamed once (8, 4 or 2 streams, each on through a run of the
//    task's rows: RowPasses, cpu/decode_rows.h) and each of its vectors dotted with every x row from its
//    register; this path is bound by memory bandwidth, so it reads the weight in its stored dtype.
//    Small batches (up to float_row_dots_max_m rows) run the same dots on chunks of at most
//    kFloatAvx2ChunkRows rows.
//  - many rows (prefill, larger batches): weight panels are widened to f32 and transposed into a
//    thread-local buffer once per K block, then a 6x16 register-tiled micro-kernel runs over all rows
//    of the task (panel_avx2.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/decode_rows.h"
#include "cpu/unroll.h"
#include "gemm_float/gemm_float_isa.h"
#include "gemm_float/panel_avx2.h"

namespace spark::kernels {

namespace {

template <FloatDType DT>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (DT == FloatDType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  } else if constexpr (DT == FloatDType::kBF16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    return _mm256_cvtph_ps(h);
  }
}

template <FloatDType DT>
inline float load1(const void* base, int64_t i) {
  if constexpr (DT == FloatDType::kF32) {
    return static_cast<const float*>(base)[i];
  } else if constexpr (DT == FloatDType::kBF16) {
    uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  } else {
    return _cvtsh_ss(static_cast<const uint16_t*>(base)[i]);
  }
}

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Dot products of M (<= 6) x rows with R weight rows per pass: each weight vector is loaded once
// and used for every x row from its register (the M x R accumulators take at most 12 of the 16
// registers). The R rows are R streams (RowPasses: in decode each goes on through a run of rows), each
// asking for its lines ahead (prefetch_row_ahead).
template <FloatDType DT, int M>
void small_m_rows(const float* x, const FloatWeight& w, float* y, int64_t ldy, int64_t n_begin, int64_t n_end,
                  RowOrder order) {
  constexpr int R = M == 1 ? 8 : (M == 2 ? 4 : 2);
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
    __m256 acc[M][R];
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
      if ((kk * elem) % 64 == 0) {
        SPARK_UNROLL
        for (int r = 0; r < R; ++r) prefetch_row_ahead(wr[r], kk * elem, k * elem, passes.rows_skipped());
      }
      __m256 wv[R];
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) wv[r] = load8<DT>(wr[r], kk);
      SPARK_UNROLL
      for (int i = 0; i < M; ++i) {
        const __m256 xv = _mm256_loadu_ps(x + i * k + kk);
        SPARK_UNROLL
        for (int r = 0; r < R; ++r) acc[i][r] = _mm256_fmadd_ps(xv, wv[r], acc[i][r]);
      }
    }
    SPARK_UNROLL
    for (int i = 0; i < M; ++i) {
      SPARK_UNROLL
      for (int r = 0; r < R; ++r) {
        if (r >= rows) continue;
        float s = hsum(acc[i][r]);
        for (int64_t e = kk; e < k; ++e) s += x[i * k + e] * load1<DT>(wr[r], e);
        y[i * ldy + n + r * step] = s;
      }
    }
  }
}

// In-register transpose of an 8 x 8 f32 tile: r[i] holds row i on entry and column i on exit.
inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// panel[kk * 16 + r] = W[n0 + r, k0 + kk] widened to f32, zero for rows >= N: 8 x 8 tiles are loaded row
// by row and transposed in registers, so the panel is written in whole vectors (the ragged end of K
// element by element).
template <FloatDType DT>
struct FloatPacker {
  const FloatWeight& w;
  void operator()(int64_t n0, int64_t k0, int64_t kc, float* panel) const {
    const int64_t elem = float_dtype_size(DT);
    const auto* base = static_cast<const uint8_t*>(w.data);
    const int64_t full = kc / 8 * 8;
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t r0 = n0 + half * 8;
      const int64_t rows = std::clamp<int64_t>(w.n - r0, 0, 8);
      for (int64_t kk = 0; kk < full; kk += 8) {
        __m256 t[8];
        for (int64_t r = 0; r < 8; ++r) {
          t[r] = r < rows ? load8<DT>(base + ((r0 + r) * w.k + k0) * elem, kk) : _mm256_setzero_ps();
        }
        transpose8x8(t);
        for (int j = 0; j < 8; ++j) _mm256_store_ps(panel + (kk + j) * avx2::kPanelNr + half * 8, t[j]);
      }
      for (int64_t r = 0; r < 8; ++r) {
        const void* row = base + ((r0 + r) * w.k + k0) * elem;
        for (int64_t kk = full; kk < kc; ++kk) {
          panel[kk * avx2::kPanelNr + half * 8 + r] = r < rows ? load1<DT>(row, kk) : 0.0f;
        }
      }
    }
  }
};

template <FloatDType DT>
void gemm_typed(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy, ThreadPool& pool) {
  if (m <= float_row_dots_max_m(DT, false)) {
    run_row_dot_tasks<kFloatAvx2ChunkRows>(pool, m, w.n, [&](int64_t b, int64_t e) {
      row_dot_chunks<kFloatAvx2ChunkRows>(
          m, b, e, nullptr, 0,
          [&](int64_t i0, auto rows, int64_t n0, int64_t n1, PanelPrefetch, RowOrder order) {
            small_m_rows<DT, rows>(x + i0 * w.k, w, y + i0 * ldy, ldy, n0, n1, order);
          });
    });
  } else {
    avx2::panel_gemm(x, m, w.k, w.n, w.k, y, ldy, pool, FloatPacker<DT>{w});
  }
}

}  // namespace

void gemm_float_avx2(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
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
