// AVX2 kernels of kW4A16 (w = q · scale + min per group of 128, activations rounded to bf16 and held in
// f32): per-group Σ x·q in registers on tiles of up to 4 rows for decode and batches up to
// w4a16_f32_tiles_max_m rows, dequantized f32 panels (one 16-row block is exactly one panel of panel_avx2.h)
// for larger prefill.
#include <immintrin.h>

#include <cstring>

#include "cpu/unroll.h"
#include "gemm/gemm_isa.h"
#include "gemm/tile_driver.h"
#include "gemm_float/panel_avx2.h"

namespace spark::kernels {

namespace {

constexpr int64_t kLinesPerGroup = kGroupSize * kBlockRows / 2 / 64;

// 8 rows of one k pair: the 8 packed bytes, one per 32-bit lane.
inline __m256i widen8_raw(const uint8_t* p) {
  int64_t packed;
  std::memcpy(&packed, p, 8);
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(packed));
}

// 8 rows of one k pair: the low nibbles (k even) and high nibbles (k odd) as floats.
inline void widen8(const uint8_t* p, __m256* lo, __m256* hi) {
  const __m256i raw = widen8_raw(p);
  *lo = _mm256_cvtepi32_ps(_mm256_and_si256(raw, _mm256_set1_epi32(0x0f)));
  *hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(raw, 4));
}

// 8 rows of one k pair for the tiles: the whole bytes lo + 16·hi and the high nibbles, as floats. With
// the odd activation x1 replaced by x1 - 16·x0 (gemm_w4a16_avx2), (lo + 16·hi)·x0 + hi·(x1 - 16·x0) =
// lo·x0 + hi·x1: one mask fewer per 8 weights than widen8.
inline void widen8_bytes(const uint8_t* p, __m256* bytes, __m256* hi) {
  const __m256i raw = widen8_raw(p);
  *bytes = _mm256_cvtepi32_ps(raw);
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

// Tiles: MR rows x one block (two vectors of 8 rows). AVX2 has 16 registers, so the tile is one
// block wide and the group results wait in memory (`out`): two blocks with even and odd k in separate
// chains held 8 accumulators + 8 widened vectors, and GCC spilled accumulators inside the k loop (a
// store-to-load round trip on each FMA chain, half the speed).
struct W4A16Kernel {
  static constexpr int kDecodeNb = 1;
  static constexpr int kPrefillMr = 4;  // batches up to w4a16_f32_tiles_max_m rows
  static constexpr int kPrefillNb = 1;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    static_assert(NB == 1);
    // Chains per output vector, so the FMAs are not bound by their latency (4 cycles): at two rows even
    // and odd k accumulate separately (with one chain a vector two rows issued 8 lanes a cycle, 1.3x
    // slower), at one row also even and odd pairs (8 accumulators: 1.04x over 4 with the weights in L2);
    // from three rows the rows give the chains (C = 2 would spill).
    constexpr int C = MR == 1 ? 4 : (MR <= 2 ? 2 : 1);
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* params = static_cast<const uint16_t*>(w.scales) + b0 * groups * 2 * kBlockRows;
    const float* x = c.x + m0 * c.ldx;
    const float* xsum = c.x_group_sums + m0 * groups;
    alignas(32) float out[MR][kBlockRows] = {};
    for (int64_t g = 0; g < groups; ++g) {
      __m256 acc[MR][2][C];
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        SPARK_UNROLL
        for (int v = 0; v < 2; ++v) {
          SPARK_UNROLL
          for (int t = 0; t < C; ++t) acc[i][v][t] = _mm256_setzero_ps();
        }
      }
      // A 64-byte line of a block holds 4 k pairs (p) of its 16 rows.
      for (int64_t l = g * kLinesPerGroup; l < (g + 1) * kLinesPerGroup; ++l) {
        // Past a block's end this asks for the next block's first lines (in decode, the next tile's).
        prefetch_line(wq + (l + kDecodePrefetchLines) * 64);
        SPARK_UNROLL
        for (int s = 0; s < 4; ++s) {
          const int64_t p = 4 * l + s;
          // Both halves widened first, then each row's two activations broadcast once: 4 widened vectors,
          // 2 broadcasts and at most 8 accumulators stay within the 16 registers.
          __m256 wlo[2], whi[2];
          SPARK_UNROLL
          for (int v = 0; v < 2; ++v) widen8_bytes(wq + p * kBlockRows + v * 8, &wlo[v], &whi[v]);
          SPARK_UNROLL
          for (int i = 0; i < MR; ++i) {
            const __m256 x0 = _mm256_broadcast_ss(x + i * c.ldx + 2 * p);
            const __m256 x1 = _mm256_broadcast_ss(x + i * c.ldx + 2 * p + 1);
            SPARK_UNROLL
            for (int v = 0; v < 2; ++v) {
              acc[i][v][(2 * s) % C] = _mm256_fmadd_ps(wlo[v], x0, acc[i][v][(2 * s) % C]);
              acc[i][v][(2 * s + 1) % C] = _mm256_fmadd_ps(whi[v], x1, acc[i][v][(2 * s + 1) % C]);
            }
          }
        }
      }
      SPARK_UNROLL
      for (int v = 0; v < 2; ++v) {
        const uint16_t* pg = params + g * 2 * kBlockRows + v * 8;
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg)));
        const __m256 mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + kBlockRows)));
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          __m256 dot = acc[i][v][0];
          SPARK_UNROLL
          for (int t = 1; t < C; ++t) dot = _mm256_add_ps(dot, acc[i][v][t]);
          __m256 r = _mm256_fmadd_ps(s, dot, _mm256_load_ps(out[i] + v * 8));
          r = _mm256_fmadd_ps(mn, _mm256_set1_ps(xsum[i * groups + g]), r);
          _mm256_store_ps(out[i] + v * 8, r);
        }
      }
    }
    SPARK_UNROLL
    for (int v = 0; v < 2; ++v) {
      const int64_t n0 = b0 * kBlockRows + v * 8;
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i)
        store_lanes(c.y + (m0 + i) * c.ldy + n0, _mm256_load_ps(out[i] + v * 8), w.n - n0);
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
  // activations). The panels take that copy as it is; for the tiles the same pass also sums each group
  // (zero points) and takes each pair (x0, x1) as (x0, x1 - 16·x0) (widen8_bytes). x0 and x1 are bf16 and
  // 16·x0 is exact, so the difference is exact unless they are more than 2^15 apart; the sums of the
  // larger products cost ~4 bits of f32 rounding, far below the 2^-9 of rounding x to bf16.
  const bool tiles = m <= w4a16_f32_tiles_max_m(false);
  const int64_t groups = w.groups();
  auto* padded = static_cast<float*>(scratch(1, static_cast<size_t>(m * w.k_pad) * sizeof(float)));
  auto* xsum =
      tiles ? static_cast<float*>(scratch(2, static_cast<size_t>(m * groups) * sizeof(float))) : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    float* row = padded + i * w.k_pad;
    for (int64_t g = 0; g < groups; ++g) {
      __m256 s = _mm256_setzero_ps();
      for (int64_t kk = g * kGroupSize; kk < (g + 1) * kGroupSize; kk += 8) {
        const __m256 v = round_to_bf16(kk + 8 <= w.k ? _mm256_loadu_ps(x + i * w.k + kk)
                                                     : load_partial(x + i * w.k + kk, w.k - kk));
        if (!tiles) {
          _mm256_storeu_ps(row + kk, v);
          continue;
        }
        s = _mm256_add_ps(s, v);
        const __m256 odd = _mm256_fnmadd_ps(_mm256_set1_ps(16.0f), _mm256_moveldup_ps(v), v);
        _mm256_storeu_ps(row + kk, _mm256_blend_ps(v, odd, 0xaa));
      }
      if (!tiles) continue;
      alignas(32) float t[8];
      _mm256_store_ps(t, s);
      xsum[i * groups + g] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    }
  }
  const float* xp = padded;
  if (!tiles) {
    // Panels are whole 16-row blocks, so n is rounded up to n_pad here; columns past w.n are not stored.
    avx2::panel_gemm(xp, m, w.k_pad, w.n, w.k_pad, y, ldy, pool, W4A16Packer{w});
    return;
  }
  run_tiles<W4A16Kernel>(TileContext{w, nullptr, xp, w.k_pad, xsum, y, ldy, {}}, m, pool);
}

}  // namespace spark::kernels
