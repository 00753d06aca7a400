// AVX2 kernels of kW4A16 (w = q · scale + min per group of 128, activations rounded to bf16 and held in
// f32); same two shapes as w4a16_avx512.cpp: per-group Σ x·q in registers for decode, dequantized f32
// panels (one 16-row block is exactly one panel of panel_avx2.h) for prefill.
#include <immintrin.h>

#include <cstring>

#include "cpu/unroll.h"
#include "gemm/gemm_isa.h"
#include "gemm/tile_driver.h"
#include "gemm_float/panel_avx2.h"

namespace spark::kernels {

namespace {

// 8 rows of one k pair: the low nibbles (k even) and high nibbles (k odd) as floats.
inline void widen8(const uint8_t* p, __m256* lo, __m256* hi) {
  int64_t bytes;
  std::memcpy(&bytes, p, 8);
  const __m256i raw = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
  *lo = _mm256_cvtepi32_ps(_mm256_and_si256(raw, _mm256_set1_epi32(0x0f)));
  *hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(raw, 4));
}

inline void store_lanes(float* dst, __m256 v, int64_t valid) {
  if (valid >= 8) {
    _mm256_storeu_ps(dst, v);
  } else if (valid > 0) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lanes), v);
  }
}

inline __m256 load_partial(const float* p, int64_t valid) {
  alignas(32) float t[8] = {};
  for (int64_t j = 0; j < valid && j < 8; ++j) t[j] = p[j];
  return _mm256_load_ps(t);
}

// bf16(v) widened back to f32: round to nearest even as f32_to_bf16 (NaN stays a quiet NaN).
inline __m256 round_to_bf16(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i out = _mm256_blendv_epi8(r, _mm256_or_si256(b, _mm256_set1_epi32(0x400000)), nan);
  return _mm256_castsi256_ps(_mm256_and_si256(out, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

struct W4A16Kernel {
  static constexpr int kDecodeNb = 2;
  static constexpr int kPrefillMr = 1;  // unused: large m goes through the panel GEMM
  static constexpr int kPrefillNb = 1;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    constexpr int NV = 2 * NB;
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* params = static_cast<const uint16_t*>(w.scales) + b0 * groups * 2 * kBlockRows;
    const float* x = c.x + m0 * c.ldx;
    const float* xsum = c.x_group_sums + m0 * groups;
    __m256 facc[MR][NV];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int v = 0; v < NV; ++v) facc[i][v] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < groups; ++g) {
      // Even and odd k accumulate separately: two independent FMA chains per output vector, so decode
      // (one row of x) is not bound by FMA latency.
      __m256 acc0[MR][NV], acc1[MR][NV];
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        SPARK_UNROLL
        for (int v = 0; v < NV; ++v) acc0[i][v] = acc1[i][v] = _mm256_setzero_ps();
      }
      for (int64_t p = g * kGroupSize / 2; p < (g + 1) * kGroupSize / 2; ++p) {
        __m256 wlo[NV], whi[NV];
        SPARK_UNROLL
        for (int v = 0; v < NV; ++v)
          widen8(wq + (v / 2) * block_bytes + p * kBlockRows + (v % 2) * 8, &wlo[v], &whi[v]);
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          const __m256 x0 = _mm256_broadcast_ss(x + i * c.ldx + 2 * p);
          const __m256 x1 = _mm256_broadcast_ss(x + i * c.ldx + 2 * p + 1);
          SPARK_UNROLL
          for (int v = 0; v < NV; ++v) {
            acc0[i][v] = _mm256_fmadd_ps(wlo[v], x0, acc0[i][v]);
            acc1[i][v] = _mm256_fmadd_ps(whi[v], x1, acc1[i][v]);
          }
        }
      }
      SPARK_UNROLL
      for (int v = 0; v < NV; ++v) {
        const uint16_t* pg = params + ((v / 2) * groups + g) * 2 * kBlockRows + (v % 2) * 8;
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg)));
        const __m256 mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + kBlockRows)));
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          facc[i][v] = _mm256_fmadd_ps(s, _mm256_add_ps(acc0[i][v], acc1[i][v]), facc[i][v]);
          facc[i][v] = _mm256_fmadd_ps(mn, _mm256_set1_ps(xsum[i * groups + g]), facc[i][v]);
        }
      }
    }
    SPARK_UNROLL
    for (int v = 0; v < NV; ++v) {
      const int64_t n0 = b0 * kBlockRows + v * 8;
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) store_lanes(c.y + (m0 + i) * c.ldy + n0, facc[i][v], w.n - n0);
    }
  }
};

// panel[kk * 16 + r] = q · scale + min for the 16 rows of block n0 / 16, columns k0 + kk.
struct W4A16Packer {
  const QuantizedWeight& w;
  void operator()(int64_t n0, int64_t k0, int64_t kc, float* panel) const {
    const int64_t groups = w.groups();
    const int64_t b = n0 / kBlockRows;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b * w.k_pad * kBlockRows / 2;
    const auto* params = static_cast<const uint16_t*>(w.scales) + b * groups * 2 * kBlockRows;
    for (int64_t g = k0 / kGroupSize; g < (k0 + kc) / kGroupSize; ++g) {
      for (int half = 0; half < 2; ++half) {
        const uint16_t* pg = params + g * 2 * kBlockRows + half * 8;
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg)));
        const __m256 mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + kBlockRows)));
        for (int64_t p = g * kGroupSize / 2; p < (g + 1) * kGroupSize / 2; ++p) {
          __m256 lo, hi;
          widen8(wq + p * kBlockRows + half * 8, &lo, &hi);
          const int64_t kk = 2 * p - k0;
          _mm256_store_ps(panel + kk * avx2::kPanelNr + half * 8, _mm256_fmadd_ps(lo, s, mn));
          _mm256_store_ps(panel + (kk + 1) * avx2::kPanelNr + half * 8, _mm256_fmadd_ps(hi, s, mn));
        }
      }
    }
  }
};

}  // namespace

void gemm_w4a16_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool) {
  // The kernels read whole groups: x is copied with zero columns up to k_pad, rounded to bf16 (kW4A16's
  // activations).
  auto* padded = static_cast<float*>(scratch(1, static_cast<size_t>(m * w.k_pad) * sizeof(float)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < w.k_pad; kk += 8) {
      const __m256 v =
          kk + 8 <= w.k ? _mm256_loadu_ps(x + i * w.k + kk) : load_partial(x + i * w.k + kk, w.k - kk);
      _mm256_storeu_ps(padded + i * w.k_pad + kk, round_to_bf16(v));
    }
  }
  const float* xp = padded;
  if (m > kDecodeMaxM) {
    // Panels are whole 16-row blocks, so n is rounded up to n_pad here; columns past w.n are not stored.
    avx2::panel_gemm(xp, m, w.k_pad, w.n, w.k_pad, y, ldy, pool, W4A16Packer{w});
    return;
  }
  const int64_t groups = w.groups();
  auto* xsum = static_cast<float*>(scratch(2, static_cast<size_t>(m * groups) * sizeof(float)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      __m256 s = _mm256_setzero_ps();
      for (int64_t kk = 0; kk < kGroupSize; kk += 8)
        s = _mm256_add_ps(s, _mm256_loadu_ps(xp + i * w.k_pad + g * kGroupSize + kk));
      alignas(32) float t[8];
      _mm256_store_ps(t, s);
      xsum[i * groups + g] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    }
  }
  run_tiles<W4A16Kernel>(TileContext{w, nullptr, xp, w.k_pad, xsum, y, ldy}, m, pool);
}

}  // namespace spark::kernels
