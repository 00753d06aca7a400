// AVX-512 kernels of kW4A16 (w = q · scale + min per group of 128, activations rounded to bf16) for CPUs
// without AVX512-BF16 (w4a16_bf16_avx512.cpp has the vdpbf16ps kernels); the rounded activations are held
// in f32.
//  - decode (m <= kDecodeMaxM): per group, Σ_k x·q is accumulated in f32 with q widened in registers (a
//    vpermps lookup turns a nibble into its float directly), then y += scale · Σ x·q + min · Σ x: one FMA
//    per weight and no dequantized copy, so the kernel streams 4.25 bits per weight. Batches up to
//    w4a16_f32_tiles_max_m rows run the same tiles 4 rows at a time.
//  - prefill: the 4-bit weights are dequantized once per task into f32 panels (16 rows of one k are 16
//    consecutive bytes' nibbles, so this is a vector operation, not a transpose) and the f32 micro-kernel
//    of panel_avx512.h runs over them, so the cost per activation row is that of an f32 GEMM.
#include <immintrin.h>

#include <cstring>

#include "cpu/unroll.h"
#include "gemm/bf16_round_avx512.h"
#include "gemm/gemm_isa.h"
#include "gemm/tile_driver.h"
#include "gemm_float/panel_avx512.h"

namespace spark::kernels {

namespace {

inline __m512 nibble_table() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

struct W4A16Kernel {
  static constexpr int kDecodeNb = 2;
  static constexpr int kPrefillMr = 4;  // batches up to w4a16_f32_tiles_max_m rows
  static constexpr int kPrefillNb = 2;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t bs = tile_block_stride<MR>(c);
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* params = static_cast<const uint16_t*>(w.scales) + b0 * groups * 2 * kBlockRows;
    const float* x = c.x + m0 * c.ldx;
    const float* xsum = c.x_group_sums + m0 * groups;
    const __m512 table = nibble_table();
    __m512 facc[MR][NB];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) facc[i][b] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < groups; ++g) {
      // Even and odd k accumulate separately: twice the independent FMA chains.
      __m512 acc0[MR][NB], acc1[MR][NB];
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) acc0[i][b] = acc1[i][b] = _mm512_setzero_ps();
      }
      for (int64_t p = g * kGroupSize / 2; p < (g + 1) * kGroupSize / 2; ++p) {
        __m512 wlo[NB], whi[NB];
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b) {
          const __m512i raw = _mm512_cvtepu8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(wq + b * bs * block_bytes + p * kBlockRows)));
          // vpermps reads only the low 4 bits of each index lane.
          wlo[b] = _mm512_permutexvar_ps(raw, table);
          whi[b] = _mm512_permutexvar_ps(_mm512_srli_epi32(raw, 4), table);
        }
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          const __m512 x0 = _mm512_set1_ps(x[i * c.ldx + 2 * p]);
          const __m512 x1 = _mm512_set1_ps(x[i * c.ldx + 2 * p + 1]);
          SPARK_UNROLL
          for (int b = 0; b < NB; ++b) {
            acc0[i][b] = _mm512_fmadd_ps(wlo[b], x0, acc0[i][b]);
            acc1[i][b] = _mm512_fmadd_ps(whi[b], x1, acc1[i][b]);
          }
        }
      }
      SPARK_UNROLL
      for (int b = 0; b < NB; ++b) {
        const uint16_t* pg = params + (b * bs * groups + g) * 2 * kBlockRows;
        const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg)));
        const __m512 mn =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + kBlockRows)));
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          facc[i][b] = _mm512_fmadd_ps(s, _mm512_add_ps(acc0[i][b], acc1[i][b]), facc[i][b]);
          facc[i][b] = _mm512_fmadd_ps(mn, _mm512_set1_ps(xsum[i * groups + g]), facc[i][b]);
        }
      }
    }
    SPARK_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int64_t n0 = (b0 + b * bs) * kBlockRows;
      const __mmask16 mask = avx512::lanes_mask(w.n - n0);
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(c.y + (m0 + i) * c.ldy + n0, mask, facc[i][b]);
    }
  }
};

// panel[kk * 32 + r] = q · scale + min for rows n0 + r (two blocks of 16), columns k0 + kk.
struct W4A16Packer {
  const QuantizedWeight& w;
  void operator()(int64_t n0, int64_t k0, int64_t kc, float* panel) const {
    const int64_t groups = w.groups();
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const __m512 table = nibble_table();
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t b = n0 / kBlockRows + half;
      float* out = panel + half * kBlockRows;
      if (b * kBlockRows >= w.n_pad) {
        for (int64_t kk = 0; kk < kc; ++kk) _mm512_store_ps(out + kk * avx512::kPanelNr, _mm512_setzero_ps());
        continue;
      }
      const auto* wq = static_cast<const uint8_t*>(w.qweight) + b * block_bytes;
      const auto* params = static_cast<const uint16_t*>(w.scales) + b * groups * 2 * kBlockRows;
      for (int64_t g = k0 / kGroupSize; g < (k0 + kc) / kGroupSize; ++g) {
        const uint16_t* pg = params + g * 2 * kBlockRows;
        const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg)));
        const __m512 mn =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + kBlockRows)));
        for (int64_t p = g * kGroupSize / 2; p < (g + 1) * kGroupSize / 2; ++p) {
          const __m512i raw =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wq + p * kBlockRows)));
          const int64_t kk = 2 * p - k0;
          _mm512_store_ps(out + kk * avx512::kPanelNr,
                          _mm512_fmadd_ps(_mm512_permutexvar_ps(raw, table), s, mn));
          _mm512_store_ps(out + (kk + 1) * avx512::kPanelNr,
                          _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(raw, 4), table), s, mn));
        }
      }
    }
  }
};

// x [m][k] -> [m][k_pad] f32 holding the bf16-rounded values, zero past k. Scratch slot 1.
const float* rounded_activations(const float* x, int64_t m, int64_t k, int64_t k_pad) {
  auto* out = static_cast<float*>(scratch(1, static_cast<size_t>(m * k_pad) * sizeof(float)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k_pad; kk += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk), x + i * k + kk);
      _mm512_store_ps(out + i * k_pad + kk, _mm512_castsi512_ps(round_to_bf16(v)));
    }
  }
  return out;
}

}  // namespace

void gemm_w4a16_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool) {
  // The kernels read whole groups: x is copied with zero columns up to k_pad, rounded to bf16.
  const float* xp = rounded_activations(x, m, w.k, w.k_pad);
  if (m > w4a16_f32_tiles_max_m(true)) {
    avx512::panel_gemm(xp, m, w.k_pad, w.n, w.k_pad, y, ldy, pool, W4A16Packer{w});
    return;
  }
  const int64_t groups = w.groups();
  auto* xsum = static_cast<float*>(scratch(2, static_cast<size_t>(m * groups) * sizeof(float)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      __m512 s = _mm512_setzero_ps();
      for (int64_t kk = 0; kk < kGroupSize; kk += 16)
        s = _mm512_add_ps(s, _mm512_loadu_ps(xp + i * w.k_pad + g * kGroupSize + kk));
      xsum[i * groups + g] = _mm512_reduce_add_ps(s);
    }
  }
  run_tiles<W4A16Kernel>(TileContext{w, nullptr, xp, w.k_pad, xsum, y, ldy, {}}, m, pool);
}

}  // namespace spark::kernels
