// AVX-512 f32 panel GEMM shared by every family whose large-M path computes in f32 (float weights,
// W4A16): a format-specific packer widens/dequantizes 32 weight rows x 256 columns into an f32 panel
// once, and a 12 x 32 register-tiled micro-kernel runs every activation row of the task over it.
// Include only from translation units compiled with the AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/lane_masks_avx512.h"
#include "cpu/unroll.h"
#include "util/thread_pool.h"

namespace spark::kernels::avx512 {
namespace {

constexpr int64_t kPanelNr = 32;       // panel width: two zmm of outputs
constexpr int64_t kPanelKc = 256;      // K block: one panel is 32 KiB
constexpr int64_t kPanelMr = 12;       // micro-kernel rows: 24 accumulators + 2 panel vectors + 1 broadcast
constexpr int64_t kPanelsPerTask = 2;  // 64 weight rows per task
constexpr int64_t kTaskRows = 192;     // activation rows per task: the panel is reused by all of them

// In-register transpose of a 16 x 16 f32 tile: r[i] holds row i on entry and column i on exit.
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  SPARK_UNROLL
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // u[4g + c], 128-bit lane L, holds rows 4g..4g+3 of column 4L + c.
  SPARK_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88),
                 w0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 v1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, v1, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(w0, w1, 0xdd);
  }
}

// c[0..MR) x [0..n_valid) (+)= x[0..MR) x panel over kc columns; x has row stride ldx.
template <int MR>
void f32_micro(const float* x, int64_t ldx, const float* panel, int64_t kc, float* c, int64_t ldc,
               int64_t n_valid, bool accumulate) {
  __m512 acc[MR][2];
  SPARK_UNROLL
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512 b0 = _mm512_load_ps(panel + kk * kPanelNr);
    const __m512 b1 = _mm512_load_ps(panel + kk * kPanelNr + 16);
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(x[i * ldx + kk]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  const __mmask16 m0 = lanes_mask(n_valid), m1 = lanes_mask(n_valid - 16);
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

using F32Micro = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);
constexpr F32Micro kF32Micro[kPanelMr + 1] = {
    nullptr,      f32_micro<1>, f32_micro<2>, f32_micro<3>,  f32_micro<4>,  f32_micro<5>, f32_micro<6>,
    f32_micro<7>, f32_micro<8>, f32_micro<9>, f32_micro<10>, f32_micro<11>, f32_micro<12>};

// y[m, n] = x[m, k] · Wᵀ where pack(n0, k0, kc, panel) writes panel[kk * 32 + r] = W[n0 + r, k0 + kk]
// (zero for rows n0 + r >= n) and micro[mr] is a micro-kernel of mr rows over such a panel. Elements are
// 4 bytes: f32, or a pair of bf16 (then k counts pairs). Tasks are 64 weight rows x 192 activation rows;
// within a task the panels of one K block are packed once and swept by every activation row.
template <class Elem, class Pack, class Micro>
void panel_gemm_with(const Elem* x, int64_t m, int64_t ldx, int64_t n, int64_t k, float* y, int64_t ldy,
                     ThreadPool& pool, const Pack& pack, const Micro* micro) {
  static_assert(sizeof(Elem) == 4);
  const int64_t task_cols = kPanelNr * kPanelsPerTask;
  const int64_t tasks_n = (n + task_cols - 1) / task_cols;
  const int64_t tasks_m = (m + kTaskRows - 1) / kTaskRows;
  pool.run(static_cast<size_t>(tasks_n * tasks_m), [&](size_t task) {
    alignas(64) static thread_local Elem panels[kPanelsPerTask * kPanelKc * kPanelNr];
    const int64_t tn = static_cast<int64_t>(task) % tasks_n, tm = static_cast<int64_t>(task) / tasks_n;
    const int64_t n0 = tn * task_cols;
    const int64_t n_panels = std::min<int64_t>(kPanelsPerTask, (n - n0 + kPanelNr - 1) / kPanelNr);
    const int64_t m_begin = tm * kTaskRows, m_end = std::min(m, m_begin + kTaskRows);
    for (int64_t k0 = 0; k0 < k; k0 += kPanelKc) {
      const int64_t kc = std::min(kPanelKc, k - k0);
      for (int64_t p = 0; p < n_panels; ++p)
        pack(n0 + p * kPanelNr, k0, kc, panels + p * kPanelKc * kPanelNr);
      for (int64_t m0 = m_begin; m0 < m_end; m0 += kPanelMr) {
        const int64_t mr = std::min(kPanelMr, m_end - m0);
        for (int64_t p = 0; p < n_panels; ++p) {
          const int64_t np0 = n0 + p * kPanelNr;
          micro[mr](x + m0 * ldx + k0, ldx, panels + p * kPanelKc * kPanelNr, kc, y + m0 * ldy + np0, ldy,
                    std::min(kPanelNr, n - np0), k0 > 0);
        }
      }
    }
  });
}

template <class Pack>
void panel_gemm(const float* x, int64_t m, int64_t ldx, int64_t n, int64_t k, float* y, int64_t ldy,
                ThreadPool& pool, const Pack& pack) {
  panel_gemm_with(x, m, ldx, n, k, y, ldy, pool, pack, kF32Micro);
}

}  // namespace
}  // namespace spark::kernels::avx512
