// AMX-BF16 kernel of kW4A16 for m > kDecodeMaxM (decode stays on the AVX512-BF16 GEMV). tdpbf16ps
// multiplies a 16 x 32 bf16 activation tile by a 32 x 16 weight tile into 16 x 16 f32: 8192 products,
// where a vdpbf16ps does 32, so W4A16 prefill is no longer bound by the vector units.
//  - The weights enter the tiles exactly, as in the AVX512-BF16 kernels: nibble q becomes the bf16 of
//    1 + q/16, and per group of 128, y += 16·scale · D + (min - 16·scale) · Σ x with D = Σ x · (1 + q/16).
//    So the result is the reference's up to f32 summation order (activations rounded to bf16, as kW4A16
//    defines them).
//  - The layout's 16 bytes per k pair of a 16-row block are one line of a B tile (lane r: the pair's two
//    k of row r as two bf16), so a B tile is 256 consecutive bytes widened; each task widens its two
//    blocks once into scratch and sweeps up to kTaskRows activation rows over them.
//  - Per group (four k tiles) the four accumulators are stored and scaled into the f32 outputs of the
//    task's 32 x 32 cell.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/amx_tiles.h"
#include "gemm/bf16_round_avx512.h"
#include "gemm/gemm_isa.h"
#include "gemm_float/panel_avx512.h"

namespace spark::kernels {

namespace {

constexpr int64_t kTaskRows = 256;  // activation rows per task
constexpr int64_t kTaskBlocks = 2;  // weight blocks (16 rows each) per task: two B tiles per k tile
constexpr int64_t kTilesPerGroup = kGroupSize / 32;

// Tiles (amx::configure_tiles) 0-3: C (16 x 16 f32); 4-5: A (16 rows x 32 bf16); 6-7: B (16 pair-rows x
// 16 columns).

// x [m][k] f32 -> A tiles of bf16 (rounded as kW4A16 defines): tile (mt, kt) holds rows 16mt.. x
// elements 32kt.. at (mt · KT + kt) · 1024 bytes; rows past m and columns past k are zero. Also Σ over each
// group of the rounded values of each row (xsum [m_tiles · 16][groups]). Scratch slots 1 and 3.
struct TiledActivations {
  const uint16_t* tiles = nullptr;
  const float* xsum = nullptr;
  int64_t kt_count = 0;
  const uint16_t* tile(int64_t m0, int64_t kt) const { return tiles + ((m0 / 16) * kt_count + kt) * 512; }
};

TiledActivations tile_activations(const float* x, int64_t m, int64_t k, int64_t k_pad, int64_t m_tiles,
                                  ThreadPool& pool) {
  TiledActivations t;
  t.kt_count = k_pad / 32;
  const int64_t groups = k_pad / kGroupSize;
  auto* out = static_cast<uint16_t*>(scratch(1, static_cast<size_t>(m_tiles * t.kt_count) * 1024));
  auto* xsum = static_cast<float*>(scratch(3, static_cast<size_t>(m_tiles * 16 * groups) * sizeof(float)));
  pool.run(static_cast<size_t>(m_tiles), [&](size_t task) {
    const int64_t mt = static_cast<int64_t>(task);
    for (int64_t r = 0; r < 16; ++r) {
      const int64_t row = mt * 16 + r;
      for (int64_t g = 0; g < groups; ++g) {
        __m512 sum = _mm512_setzero_ps();
        for (int64_t kt = g * kTilesPerGroup; kt < (g + 1) * kTilesPerGroup; ++kt) {
          __m512i lo = _mm512_setzero_si512(), hi = lo;
          if (row < m) {
            const int64_t kk = kt * 32;
            lo = round_to_bf16(_mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk), x + row * k + kk));
            hi = round_to_bf16(_mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk - 16), x + row * k + kk + 16));
            sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_castsi512_ps(lo), _mm512_castsi512_ps(hi)));
          }
          // The high halves of the 32 rounded lanes, in k order.
          const __m512i packed = _mm512_packus_epi32(_mm512_srli_epi32(lo, 16), _mm512_srli_epi32(hi, 16));
          const __m512i ordered = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), packed);
          _mm512_store_si512(out + (mt * t.kt_count + kt) * 512 + r * 32, ordered);
        }
        xsum[row * groups + g] = _mm512_reduce_add_ps(sum);
      }
    }
  });
  t.tiles = out;
  t.xsum = xsum;
  return t;
}

// Widens block b's nibbles into B tiles: tile kt (k_pad / 32 of them, 1 KiB each) line p holds, in lane r,
// the bf16 pair (1 + q[r, 2p']/16, 1 + q[r, 2p' + 1]/16) of k pair p' = 16 kt + p.
void widen_block(const QuantizedWeight& w, int64_t b, uint32_t* out) {
  const int64_t pairs = w.k_pad / 2;
  const auto* src = static_cast<const uint8_t*>(w.qweight) + b * pairs * kBlockRows;
  const __m512i mask = _mm512_set1_epi32(0x00780078);  // mantissa bits 3-6 of both bf16 halves
  const __m512i one = _mm512_set1_epi32(0x3f803f80);   // 1.0 in both halves
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + p * 16)));
    // Low nibble to bits 3-6, high nibble to bits 19-22; the mask drops the other copy of each.
    const __m512i v = _mm512_or_si512(_mm512_slli_epi32(d, 3), _mm512_slli_epi32(d, 15));
    _mm512_store_si512(out + p * 16, _mm512_ternarylogic_epi32(v, mask, one, 0xea));  // (v & mask) | one
  }
}

// Rows [m0, m0 + 16·MT) of the task's two blocks (B tiles b0, b1): per group, D in tiles 0-3, then
// out += 16·scale · D + (min - 16·scale) · Σ x. out: [32][32] f32 (rows, the two blocks' 16 columns).
template <int MT>
void cell(const QuantizedWeight& w, const TiledActivations& x, int64_t m0, const uint32_t* b0,
          const uint32_t* b1, int64_t block, int valid_blocks, float* out) {
  const int64_t groups = w.groups();
  const auto* params = static_cast<const uint16_t*>(w.scales) + block * groups * 2 * kBlockRows;
  alignas(64) float c[4][256];
  for (int64_t g = 0; g < groups; ++g) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (MT == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
    for (int64_t kt = g * kTilesPerGroup; kt < (g + 1) * kTilesPerGroup; ++kt) {
      _tile_loadd(4, x.tile(m0, kt), 64);
      _tile_loadd(6, b0 + kt * 256, 64);
      _tile_loadd(7, b1 + kt * 256, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if constexpr (MT == 2) {
        _tile_loadd(5, x.tile(m0 + 16, kt), 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    if constexpr (MT == 2) {
      _tile_stored(2, c[2], 64);
      _tile_stored(3, c[3], 64);
    }
    for (int j = 0; j < valid_blocks; ++j) {
      const uint16_t* pg = params + (j * groups + g) * 2 * kBlockRows;
      const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg)));
      const __m512 mn =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + kBlockRows)));
      const __m512 s16 = _mm512_mul_ps(s, _mm512_set1_ps(16.0f));
      const __m512 mn16 = _mm512_sub_ps(mn, s16);
      for (int64_t r = 0; r < 16 * MT; ++r) {
        float* o = out + r * 32 + j * 16;
        const __m512 d = _mm512_load_ps(c[(r / 16) * 2 + j] + (r % 16) * 16);
        __m512 v = _mm512_fmadd_ps(s16, d, _mm512_load_ps(o));
        v = _mm512_fmadd_ps(mn16, _mm512_set1_ps(x.xsum[(m0 + r) * groups + g]), v);
        _mm512_store_ps(o, v);
      }
    }
  }
}

}  // namespace

void gemm_w4a16_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                    ThreadPool& pool) {
  if (m <= kDecodeMaxM) {
    gemm_w4a16_bf16_avx512(x, m, w, y, ldy, pool);
    return;
  }
  const int64_t m_tiles = (m + 31) / 32 * 2;  // even, so 32-row steps never run past the tiles
  const TiledActivations xt = tile_activations(x, m, w.k, w.k_pad, m_tiles, pool);
  const int64_t n_blocks = w.n_pad / kBlockRows;
  const int64_t tasks_n = (n_blocks + kTaskBlocks - 1) / kTaskBlocks;
  const int64_t tasks_m = (m + kTaskRows - 1) / kTaskRows;
  const int64_t tile_words = w.k_pad / 32 * 256;  // one block's B tiles, in 32-bit lanes
  pool.run(static_cast<size_t>(tasks_n * tasks_m), [&](size_t task) {
    const int64_t tn = static_cast<int64_t>(task) % tasks_n, tm = static_cast<int64_t>(task) / tasks_n;
    const int64_t block = tn * kTaskBlocks;
    const int valid = static_cast<int>(std::min<int64_t>(kTaskBlocks, n_blocks - block));
    const int64_t m_begin = tm * kTaskRows, m_end = std::min(m, m_begin + kTaskRows);
    auto* b = static_cast<uint32_t*>(scratch(2, static_cast<size_t>(kTaskBlocks * tile_words) * 4));
    widen_block(w, block, b);
    // A missing second block multiplies the first again; its results are not stored.
    const uint32_t* b1 = valid > 1 ? b + tile_words : b;
    if (valid > 1) widen_block(w, block + 1, b + tile_words);
    amx::configure_tiles();
    alignas(64) float out[32 * 32];
    for (int64_t m0 = m_begin; m0 < m_end; m0 += 32) {
      std::memset(out, 0, sizeof out);
      const int mt = m_end - m0 > 16 ? 2 : 1;
      if (mt == 2) {
        cell<2>(w, xt, m0, b, b1, block, valid, out);
      } else {
        cell<1>(w, xt, m0, b, b1, block, valid, out);
      }
      for (int j = 0; j < valid; ++j) {
        const int64_t n0 = (block + j) * kBlockRows;
        const __mmask16 mask = avx512::lanes_mask(w.n - n0);
        for (int64_t r = 0; r < 16 * mt && m0 + r < m_end; ++r)
          _mm512_mask_storeu_ps(y + (m0 + r) * ldy + n0, mask, _mm512_load_ps(out + r * 32 + j * 16));
      }
    }
    _tile_release();
  });
}

}  // namespace spark::kernels
