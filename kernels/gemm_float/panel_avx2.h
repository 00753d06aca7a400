// AVX2 f32 panel GEMM shared by every family whose large-M path computes in f32 (float weights,
// W4A16): a format-specific packer widens/dequantizes 16 weight rows x 256 columns into an f32 panel
// once, and a 6 x 16 register-tiled micro-kernel runs every activation row of the task over it.
// Include only from translation units compiled with the AVX2 flags.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/unroll.h"
#include "util/thread_pool.h"

namespace spark::kernels::avx2 {
namespace {

constexpr int64_t kPanelNr = 16;       // panel width: two ymm of outputs
constexpr int64_t kPanelKc = 256;      // K block: one panel is 16 KiB
constexpr int64_t kPanelMr = 6;        // micro-kernel rows: 12 accumulators + 2 panel vectors + 1 broadcast
constexpr int64_t kPanelsPerTask = 4;  // 64 weight rows per task
constexpr int64_t kTaskRows = 192;     // activation rows per task: the panels are reused by all of them

// c[0..MR) x [0..n_valid) (+)= x[0..MR) x panel over kc columns; x has row stride ldx.
template <int MR>
void f32_micro(const float* x, int64_t ldx, const float* panel, int64_t kc, float* c, int64_t ldc,
               int64_t n_valid, bool accumulate) {
  __m256 acc[MR][2];
  SPARK_UNROLL
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_load_ps(panel + kk * kPanelNr);
    const __m256 b1 = _mm256_load_ps(panel + kk * kPanelNr + 8);
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(x + i * ldx + kk);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  SPARK_UNROLL
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    if (n_valid == kPanelNr) {
      if (accumulate) {
        acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_loadu_ps(ci));
        acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_loadu_ps(ci + 8));
      }
      _mm256_storeu_ps(ci, acc[i][0]);
      _mm256_storeu_ps(ci + 8, acc[i][1]);
    } else {
      alignas(32) float tmp[kPanelNr];
      _mm256_store_ps(tmp, acc[i][0]);
      _mm256_store_ps(tmp + 8, acc[i][1]);
      for (int64_t j = 0; j < n_valid; ++j) ci[j] = accumulate ? ci[j] + tmp[j] : tmp[j];
    }
  }
}

using F32Micro = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);
constexpr F32Micro kF32Micro[kPanelMr + 1] = {nullptr,      f32_micro<1>, f32_micro<2>, f32_micro<3>,
                                              f32_micro<4>, f32_micro<5>, f32_micro<6>};

// y[m, n] = x[m, k] · Wᵀ where pack(n0, k0, kc, panel) writes panel[kk * 16 + r] = W[n0 + r, k0 + kk]
// (zero for rows n0 + r >= n). Tasks are 64 weight rows x 192 activation rows; within a task the panels
// of one K block are packed once and swept by every activation row.
template <class Pack>
void panel_gemm(const float* x, int64_t m, int64_t ldx, int64_t n, int64_t k, float* y, int64_t ldy,
                ThreadPool& pool, const Pack& pack) {
  const int64_t task_cols = kPanelNr * kPanelsPerTask;
  const int64_t tasks_n = (n + task_cols - 1) / task_cols;
  const int64_t tasks_m = (m + kTaskRows - 1) / kTaskRows;
  pool.run(static_cast<size_t>(tasks_n * tasks_m), [&](size_t task) {
    alignas(64) static thread_local float panels[kPanelsPerTask * kPanelKc * kPanelNr];
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
          kF32Micro[mr](x + m0 * ldx + k0, ldx, panels + p * kPanelKc * kPanelNr, kc, y + m0 * ldy + np0, ldy,
                        std::min(kPanelNr, n - np0), k0 > 0);
        }
      }
    }
  });
}

}  // namespace
}  // namespace spark::kernels::avx2
