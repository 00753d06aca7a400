// AVX2 kernels of kW4A16 (w = q · scale + min per group of 128, activations rounded to bf16):
//  - 1 and 2 rows (decode): integer products on each group's bf16 activations split into two 16-bit
//    grids (exact down to 2^-22 of the group's largest);
//  - 3 rows up to w4a16_f32_tiles_max_m: per-group Σ x·q in f32 registers on tiles of up to 4 rows;
//  - more: dequantized f32 panels (one 16-row block is exactly one panel of panel_avx2.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Four bytes to every lane, as vbroadcastss: a load alone (vpbroadcastd from memory adds a shuffle on AMD).
inline __m256i broadcast32(const int32_t* p) {
  return _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(p)));
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

// Elements kk .. kk + 7 of a row of k, zero past its end (kk may be past it: a padding column).
inline __m256 load_tail(const float* row, int64_t kk, int64_t k) {
  return kk < k ? load_partial(row + kk, k - kk) : _mm256_setzero_ps();
}

// A group's scale and min for 8 rows of a block (v = 0: rows 0-7, 1: rows 8-15); add() takes one row's
// Σ x·q over the group (dot) and Σ x into its running outputs: out += scale · dot + min · Σ x.
struct GroupParams {
  __m256 scale, min;
  void add(__m256 dot, float xsum, float* out) const {
    const __m256 r = _mm256_fmadd_ps(scale, dot, _mm256_load_ps(out));
    _mm256_store_ps(out, _mm256_fmadd_ps(min, _mm256_set1_ps(xsum), r));
  }
};

inline GroupParams group_params(const uint16_t* params, int64_t g, int v) {
  const uint16_t* pg = params + g * 2 * kBlockRows + v * 8;
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + kBlockRows)))};
}

// A tile's MR rows x 16 outputs of block b0 into y (the lanes past N left alone).
template <int MR>
inline void store_rows(const TileContext& c, int64_t m0, int64_t b0, const float (*out)[kBlockRows]) {
  SPARK_UNROLL
  for (int v = 0; v < 2; ++v) {
    const int64_t n0 = b0 * kBlockRows + v * 8;
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i)
      store_lanes(c.y + (m0 + i) * c.ldy + n0, _mm256_load_ps(out[i] + v * 8), c.w.n - n0);
  }
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

// Float tiles (m >= 3): MR rows x one block (two vectors of 8 rows). AVX2 has 16 registers, so the tile is
// one block wide and the group results wait in memory (`out`): two blocks with even and odd k in separate
// chains held 8 accumulators + 8 widened vectors, and GCC spilled accumulators inside the k loop (a
// store-to-load round trip on each FMA chain, half the speed).
struct W4A16FloatKernel {
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
        const GroupParams gp = group_params(params, g, v);
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          __m256 dot = acc[i][v][0];
          SPARK_UNROLL
          for (int t = 1; t < C; ++t) dot = _mm256_add_ps(dot, acc[i][v][t]);
          gp.add(dot, xsum[i * groups + g], out[i] + v * 8);
        }
      }
    }
    store_rows<MR>(c, m0, b0, out);
  }
};

// The one- and two-row tiles (decode) multiply in integers: each group's bf16 activations are split into
// two 16-bit integer grids (split_group: exact down to 2^-22 of the group's largest), whose products with
// the nibbles vpmaddwd sums without rounding (A below 2^26, B below 2^30 a group). Per 16 rows of one
// k pair: one vpshufb + vpand per 8 rows put q[2p] and 16·q[2p+1] in the two 16-bit halves of each row's
// lane, then one vpmaddwd + vpaddd per grid, 8 rows and activation row. At one row that is 6 integer
// operations per 16 weights, which a Zen 3 issues on all four vector pipes (vpshufb + vpand + vpmaddwd +
// vpaddd alone: 1.0 cycle), against 6 for the f32 products (vpmovzxbd, shift, 2 vcvtdq2ps, 2 FMAs),
// which it cannot issue more than 3 a cycle of (2.0 cycles per 16 weights).
struct W4A16GridKernel {
  static constexpr int kDecodeNb = 1;
  static constexpr int kPrefillMr = 2;  // 2 rows x 2 grids x 2 halves: 8 accumulators of the 16 registers
  static constexpr int kPrefillNb = 1;

  // Rows m0 .. m0 + R - 1 of group g: out[i] += scale · Σ x·q + min · Σ x.
  template <int R>
  static void group_rows(const TileContext& c, const uint8_t* wq, const uint16_t* params, int64_t m0,
                         int64_t g, bool prefetch, float (*out)[kBlockRows]) {
    const int64_t groups = c.w.groups();
    const auto* ab = reinterpret_cast<const int32_t*>(c.x) + m0 * c.ldx;  // per pair: (a0, a1), (b0, b1)
    const __m256i lo_rows = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                             4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    const __m256i hi_rows = _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,  //
                                             12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1);
    const __m256i nibbles = _mm256_set1_epi32(0x00f0000f);
    __m256i acc[R][2][2];  // [row][grid a, b][rows 0-7, 8-15]
    SPARK_UNROLL
    for (int i = 0; i < R; ++i) {
      SPARK_UNROLL
      for (int t = 0; t < 2; ++t) acc[i][t][0] = acc[i][t][1] = _mm256_setzero_si256();
    }
    for (int64_t l = g * kLinesPerGroup; l < (g + 1) * kLinesPerGroup; ++l) {
      // Past a block's end this asks for the next block's first lines (in decode, the next tile's).
      if (prefetch) prefetch_line(wq + (l + kDecodePrefetchLines) * 64);
      SPARK_UNROLL
      for (int s = 0; s < 4; ++s) {
        const int64_t p = 4 * l + s;
        const __m256i src = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(wq + p * kBlockRows)));
        // Per row lane: the low nibble (k = 2p) in the low 16 bits, 16 · the high nibble above it.
        const __m256i w0 = _mm256_and_si256(_mm256_shuffle_epi8(src, lo_rows), nibbles);
        const __m256i w1 = _mm256_and_si256(_mm256_shuffle_epi8(src, hi_rows), nibbles);
        SPARK_UNROLL
        for (int i = 0; i < R; ++i) {
          const __m256i xa = broadcast32(ab + i * c.ldx + 2 * p);
          const __m256i xb = broadcast32(ab + i * c.ldx + 2 * p + 1);
          acc[i][0][0] = _mm256_add_epi32(acc[i][0][0], _mm256_madd_epi16(w0, xa));
          acc[i][0][1] = _mm256_add_epi32(acc[i][0][1], _mm256_madd_epi16(w1, xa));
          acc[i][1][0] = _mm256_add_epi32(acc[i][1][0], _mm256_madd_epi16(w0, xb));
          acc[i][1][1] = _mm256_add_epi32(acc[i][1][1], _mm256_madd_epi16(w1, xb));
          // Kept in registers pair by pair: otherwise GCC sums a line's products as a tree first and
          // spills them (1.2x slower).
          __asm__("" : "+x"(acc[i][0][0]), "+x"(acc[i][0][1]), "+x"(acc[i][1][0]), "+x"(acc[i][1][1]));
        }
      }
    }
    SPARK_UNROLL
    for (int v = 0; v < 2; ++v) {
      const GroupParams gp = group_params(params, g, v);
      SPARK_UNROLL
      for (int i = 0; i < R; ++i) {
        const float* gs = c.x_group_sums + ((m0 + i) * groups + g) * 3;  // grid step, Σ x
        const __m256 dot =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][1][v]), _mm256_set1_ps(gs[1]),
                            _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][0][v]), _mm256_set1_ps(gs[0])));
        gp.add(dot, gs[2], out[i] + v * 8);
      }
    }
  }

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    static_assert(NB == 1);
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* params = static_cast<const uint16_t*>(w.scales) + b0 * groups * 2 * kBlockRows;
    alignas(32) float out[MR][kBlockRows] = {};
    for (int64_t g = 0; g < groups; ++g) {
      // Two rows at a time; a group's 1 KiB of weights is read again from L1 for rows 2 and 3. (Tiles of 3
      // and 4 rows exist for run_tiles' tables only: gemm_w4a16_avx2 sends at most kW4A16Avx2GridMaxM rows.)
      if constexpr (MR == 1) {
        group_rows<1>(c, wq, params, m0, g, true, out);
      } else {
        group_rows<2>(c, wq, params, m0, g, true, out);
        if constexpr (MR == 3) group_rows<1>(c, wq, params, m0 + 2, g, false, out + 2);
        if constexpr (MR == 4) group_rows<2>(c, wq, params, m0 + 2, g, false, out + 2);
      }
    }
    store_rows<MR>(c, m0, b0, out);
  }
};

// Splits one group of 128 bf16-rounded activations v (32-byte aligned) into two 16-bit integer grids:
// with E the exponent of the group's largest |v| and u = 2^(E-14) (2^(E-10) at odd k, whose weights arrive
// as 16·q), v = (a + b · 2^-15) · u with a = v / u truncated and b the rest on a 2^-15 finer grid, rounded.
// |a| and |b| stay below 2^15. a alone holds every bf16 value down to 2^-7 of the largest (2^-3 at odd
// k), a and b together every one down to 2^-22 (2^-18 at odd k) exactly; smaller ones are rounded by at
// most half a 2^(E-29) (2^(E-25)) step. Writes, per pair, (a0, a1) then (b0, b1), and sums = {u,
// u · 2^-15, Σ v}. A group holding NaN or Inf gets u = NaN (its products are NaN, as in f32), one of
// zeros u = 0. E is held at -120 or more, so that u · 2^-15 stays at least 2^-149, the smallest f32
// (no bf16 value is below 2^-133: the hold loses nothing).
inline void split_group(const float* v, int16_t* ab, float* sums) {
  __m256 mx = _mm256_setzero_ps(), sum = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int j = 0; j < kGroupSize; j += 8) {
    const __m256 x = _mm256_load_ps(v + j);
    mx = _mm256_max_ps(mx, _mm256_and_ps(x, abs_mask));
    sum = _mm256_add_ps(sum, x);
    // x - x is NaN exactly for NaN and Inf.
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(x, x), _mm256_setzero_ps(), _CMP_NEQ_UQ));
  }
  alignas(32) float t[8], m[8];
  _mm256_store_ps(t, sum);
  _mm256_store_ps(m, mx);
  const float total = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
  const float largest = std::max(std::max(std::max(m[0], m[1]), std::max(m[2], m[3])),
                                 std::max(std::max(m[4], m[5]), std::max(m[6], m[7])));
  // A sum of finite values may still overflow to Inf: it reaches the outputs through min · Σ x, as in f32.
  sums[2] = total;
  const bool finite = _mm256_movemask_ps(bad) == 0;
  if (!finite || largest == 0.0f) {
    std::memset(ab, 0, kGroupSize * 2 * sizeof(int16_t));
    sums[0] = sums[1] = finite ? 0.0f : NAN;
    return;
  }
  const int e = std::max(std::ilogb(largest), -120);
  sums[0] = std::ldexp(1.0f, e - 14);
  sums[1] = std::ldexp(1.0f, e - 29);
  // v · 2^(14-E) (2^(10-E) at odd k) is exact: powers of two, and in two steps below E = -100 so that
  // neither factor overflows.
  const int pre = e < -100 ? 64 : 0;
  const __m256 pre_scale = _mm256_set1_ps(std::ldexp(1.0f, pre));
  const float even = std::ldexp(1.0f, 14 - e - pre), odd = std::ldexp(1.0f, 10 - e - pre);
  const __m256 to_grid = _mm256_setr_ps(even, odd, even, odd, even, odd, even, odd);
  for (int j = 0; j < kGroupSize; j += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(v + j), pre_scale), to_grid);
    const __m256i a = _mm256_cvttps_epi32(x);
    const __m256 rest = _mm256_sub_ps(x, _mm256_cvtepi32_ps(a));  // exact: the bits below the grid
    const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(rest, _mm256_set1_ps(32768.0f)));
    // packs: per 128-bit lane a0 a1 a2 a3 b0 b1 b2 b3 (16-bit, saturating); dwords reordered to pairs.
    const __m256i packed = _mm256_shuffle_epi32(_mm256_packs_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ab + 2 * j), packed);
  }
}

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

// One or two rows: each group's bf16 activations split into their two integer grids.
void gemm_w4a16_grid(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool) {
  const int64_t groups = w.groups();
  alignas(32) float group[kGroupSize];
  // Per row, k_pad / 2 pairs of (a0, a1, b0, b1) int16, and 3 floats per group.
  auto* ab = static_cast<int16_t*>(scratch(2, static_cast<size_t>(m * w.k_pad * 2) * sizeof(int16_t)));
  auto* sums = static_cast<float*>(scratch(3, static_cast<size_t>(m * groups * 3) * sizeof(float)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t kk = g * kGroupSize; kk < (g + 1) * kGroupSize; kk += 8) {
        const __m256 v = round_to_bf16(kk + 8 <= w.k ? _mm256_loadu_ps(x + i * w.k + kk)
                                                     : load_tail(x + i * w.k, kk, w.k));
        _mm256_store_ps(group + (kk - g * kGroupSize), v);
      }
      split_group(group, ab + (i * w.k_pad + g * kGroupSize) * 2, sums + (i * groups + g) * 3);
    }
  }
  // x: the grids as int32 pairs, k_pad of them per row (ldx); x_group_sums: 3 floats per group.
  run_tiles<W4A16GridKernel>(
      TileContext{w, nullptr, reinterpret_cast<const float*>(ab), w.k_pad, sums, y, ldy, {}}, m, pool);
}

}  // namespace

void gemm_w4a16_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool) {
  if (m <= kW4A16Avx2GridMaxM) {
    gemm_w4a16_grid(x, m, w, y, ldy, pool);
    return;
  }
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
                                                     : load_tail(x + i * w.k, kk, w.k));
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
  run_tiles<W4A16FloatKernel>(TileContext{w, nullptr, xp, w.k_pad, xsum, y, ldy, {}}, m, pool);
}

}  // namespace spark::kernels
