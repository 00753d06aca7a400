// AMX kernels of the integer formats for m > kDecodeMaxM (decode stays on the AVX-512 VNNI GEMV, which is
// bandwidth-bound anyway). One tdpbssd multiplies a 16 x 64 int8 activation tile by a 64 x 16
// weight tile into 16 x 16 s32: 16384 multiply-adds, where a vpdpbusd does 64.
//  - kInt8: the packed layout's 64-byte lines (4 k of 16 rows) are exactly the rows of an AMX B tile, so
//    16 consecutive lines of a block are loaded straight from the weight (stride 64); activations are
//    signed, so tdpbssd needs no correction.
//  - kW4A8: the weights are unpacked into signed bytes q - 8 in [-8, 7] (same line layout), so tdpbssd
//    gives Σ x · (q - 8) directly, the s32 that gemm_ref scales: per group of 128 the tile is only converted
//    and fma'd with the group scale (no zero-point correction per row: that pass cost as much as the tile
//    products). A task of up to kStreamRows activation rows unpacks each group of its blocks into L1 right
//    before the group's products (again for every row step); a larger one unpacks its blocks whole into
//    scratch once. Unpacking whole into L2 was 1.3-1.7x slower from 8 to 32 rows and 1.06-1.28x from 48 to
//    128; at 256 and 512 the two tie (bench/RESULTS.md, session 15).
// Each task covers 32 activation rows x 32 weight rows per step with four accumulator tiles. Activations
// are padded with zero rows to a multiple of 32, so every tile load is full.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/amx_tiles.h"
#include "cpu/lane_masks_avx512.h"
#include "gemm/gemm_isa.h"

namespace spark::kernels {

namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kTaskRows = 256;  // activation rows per task: the weights stream from memory m / 256 times
constexpr int64_t kTaskBlocks = 4;  // weight blocks (16 rows each) per task
constexpr int64_t kStreamRows = 128;  // kW4A8: up to this many rows per task, unpack a group at a time

// Tiles (amx::configure_tiles) 0-3: C (s32 accumulators); 4-5: A (activations); 6-7: B (weights).

// Stores the four accumulator tiles as c[32][32] s32 (MT = 2: tiles 0,1 rows 0-15, tiles 2,3 rows 16-31)
// or c[16][64] (MT = 1: tiles 0-3 side by side); both with a 32-int or 64-int row stride.
template <int MT>
inline void store_accumulators(int32_t* c) {
  if constexpr (MT == 2) {
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 16, 128);
    _tile_stored(2, c + 16 * 32, 128);
    _tile_stored(3, c + 16 * 32 + 16, 128);
  } else {
    _tile_stored(0, c, 256);
    _tile_stored(1, c + 16, 256);
    _tile_stored(2, c + 32, 256);
    _tile_stored(3, c + 48, 256);
  }
}

// Activations re-laid as whole tiles: tile (mt, kt) is 16 rows x 64 bytes at (mt · KT + kt) · 1024, so every
// tile load reads 1 KiB of consecutive memory instead of 16 lines 2 KiB apart.
struct TiledActivations {
  const int8_t* tiles = nullptr;
  int64_t kt_count = 0;
  const int8_t* tile(int64_t m0, int64_t kt) const {
    return tiles + ((m0 / kTileRows) * kt_count + kt) * 1024;
  }
};

TiledActivations tile_activations(const QuantizedActivations& a, int64_t m_rows, ThreadPool& pool) {
  TiledActivations t;
  t.kt_count = a.k_pad / 64;
  const int64_t m_tiles = m_rows / kTileRows;
  auto* out = static_cast<int8_t*>(scratch(3, static_cast<size_t>(m_tiles * t.kt_count) * 1024));
  pool.run(static_cast<size_t>(m_tiles), [&](size_t mt) {
    for (int64_t kt = 0; kt < t.kt_count; ++kt) {
      for (int64_t r = 0; r < kTileRows; ++r) {
        std::memcpy(out + (static_cast<int64_t>(mt) * t.kt_count + kt) * 1024 + r * 64,
                    a.q + (static_cast<int64_t>(mt) * kTileRows + r) * a.k_pad + kt * 64, 64);
      }
    }
  });
  t.tiles = out;
  return t;
}

// Accumulates k tiles [kt_begin, kt_end) of activation rows [m0, m0 + 16·MT) times the signed weight tiles at
// b[j] + (kt - b_kt0) · 1024 (j < 4 / MT; b[j] starts at k tile b_kt0) into tiles 0-3.
template <int MT>
inline void tile_products(const TiledActivations& x, int64_t m0, const int8_t* const* b, int64_t kt_begin,
                          int64_t kt_end, int64_t b_kt0 = 0) {
  for (int64_t kt = kt_begin; kt < kt_end; ++kt) {
    const int64_t bo = (kt - b_kt0) * 1024;
    if constexpr (MT == 2) {
      _tile_loadd(4, x.tile(m0, kt), 64);
      _tile_loadd(5, x.tile(m0 + kTileRows, kt), 64);
      _tile_loadd(6, b[0] + bo, 64);
      _tile_loadd(7, b[1] + bo, 64);
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    } else {
      _tile_loadd(4, x.tile(m0, kt), 64);
      _tile_loadd(6, b[0] + bo, 64);
      _tile_loadd(7, b[1] + bo, 64);
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_loadd(6, b[2] + bo, 64);
      _tile_loadd(7, b[3] + bo, 64);
      _tile_dpbssd(2, 4, 6);
      _tile_dpbssd(3, 4, 7);
    }
  }
}

inline void zero_accumulators() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// One step of kInt8: activation rows [m0, m0 + 16·MT) x the weight blocks blocks[0 .. 4/MT) (a repeated
// block stands for a missing one; its results are not stored).
template <int MT>
void int8_step(const QuantizedWeight& w, const QuantizedActivations& a, const TiledActivations& x, int64_t m0,
               const int64_t* blocks, int n_valid_blocks, float* y, int64_t ldy, int64_t m) {
  constexpr int NT = 4 / MT;
  constexpr int kCols = 16 * NT;
  const int64_t block_bytes = w.k_pad * kBlockRows;
  const int8_t* b[NT];
  for (int j = 0; j < NT; ++j) b[j] = static_cast<const int8_t*>(w.qweight) + blocks[j] * block_bytes;
  zero_accumulators();
  tile_products<MT>(x, m0, b, 0, w.k_pad / 64);
  alignas(64) int32_t c[16 * MT * kCols];
  store_accumulators<MT>(c);
  const auto* scales = static_cast<const float*>(w.scales);
  for (int j = 0; j < n_valid_blocks; ++j) {
    const int64_t n0 = blocks[j] * kBlockRows;
    const __mmask16 mask = avx512::lanes_mask(w.n - n0);
    const __m512 sv = _mm512_loadu_ps(scales + n0);
    for (int64_t r = 0; r < 16 * MT && m0 + r < m; ++r) {
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + r * kCols + j * 16)), sv);
      v = _mm512_mul_ps(v, _mm512_set1_ps(a.scale[m0 + r]));
      _mm512_mask_storeu_ps(y + (m0 + r) * ldy + n0, mask, v);
    }
  }
}

// Unpacks the packed lines [p_begin, p_end) of W4A8 block b (line p: k = 8p..8p+7 of the block's 16 rows)
// into signed bytes q - 8: line kq of the result holds k = 4(kq + 2 p_begin)..+3, so a k tile (64 k) is
// 16 lines, 1 KiB.
void unpack_w4a8_lines(const QuantizedWeight& w, int64_t b, int64_t p_begin, int64_t p_end, int8_t* out) {
  const int64_t block_bytes = w.k_pad * kBlockRows / 2;
  const auto* src = static_cast<const uint8_t*>(w.qweight) + b * block_bytes;
  const __m512i low4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
  for (int64_t p = p_begin; p < p_end; ++p) {
    const __m512i raw = _mm512_loadu_si512(src + p * 64);
    int8_t* o = out + 2 * (p - p_begin) * 64;
    _mm512_store_si512(o, _mm512_sub_epi8(_mm512_and_si512(raw, low4), eight));
    _mm512_store_si512(o + 64, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low4), eight));
  }
}

// One step of kW4A8 over the blocks numbered in `blocks` (as in int8_step): unpacked q[0 .. 4/MT), or, with
// q == nullptr, each group of each block unpacked into L1 just before its products.
template <int MT>
void w4a8_step(const QuantizedWeight& w, const QuantizedActivations& a, const TiledActivations& x, int64_t m0,
               const int8_t* const* q, const int64_t* blocks, int n_valid_blocks, float* y, int64_t ldy,
               int64_t m) {
  constexpr int NT = 4 / MT;
  constexpr int kCols = 16 * NT;
  const int64_t groups = w.groups();
  const auto* scales = static_cast<const uint16_t*>(w.scales);
  alignas(64) float t[16 * MT * kCols];
  std::memset(t, 0, sizeof t);
  alignas(64) int32_t c[16 * MT * kCols];
  alignas(64) int8_t group_tiles[NT][2 * 1024];
  const int8_t* group_q[NT];
  for (int j = 0; j < NT; ++j) group_q[j] = group_tiles[j];
  for (int64_t g = 0; g < groups; ++g) {
    zero_accumulators();
    if (q != nullptr) {
      tile_products<MT>(x, m0, q, 2 * g, 2 * g + 2);
    } else {
      for (int j = 0; j < NT; ++j) unpack_w4a8_lines(w, blocks[j], 16 * g, 16 * g + 16, group_tiles[j]);
      tile_products<MT>(x, m0, group_q, 2 * g, 2 * g + 2, 2 * g);
    }
    store_accumulators<MT>(c);
    for (int j = 0; j < n_valid_blocks; ++j) {
      const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(scales + (blocks[j] * groups + g) * kBlockRows)));
      for (int64_t r = 0; r < 16 * MT; ++r) {
        float* tr = t + r * kCols + j * 16;
        _mm512_store_ps(tr, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + r * kCols + j * 16)), s,
                                            _mm512_load_ps(tr)));
      }
    }
  }
  for (int j = 0; j < n_valid_blocks; ++j) {
    const int64_t n0 = blocks[j] * kBlockRows;
    const __mmask16 mask = avx512::lanes_mask(w.n - n0);
    for (int64_t r = 0; r < 16 * MT && m0 + r < m; ++r) {
      const __m512 v = _mm512_mul_ps(_mm512_load_ps(t + r * kCols + j * 16), _mm512_set1_ps(a.scale[m0 + r]));
      _mm512_mask_storeu_ps(y + (m0 + r) * ldy + n0, mask, v);
    }
  }
}

template <class Step>
void run_amx(const QuantizedWeight& w, int64_t m, ThreadPool& pool, const Step& step) {
  const int64_t n_blocks = w.n_pad / kBlockRows;
  const int64_t tasks_n = (n_blocks + kTaskBlocks - 1) / kTaskBlocks;
  const int64_t tasks_m = (m + kTaskRows - 1) / kTaskRows;
  pool.run(static_cast<size_t>(tasks_n * tasks_m), [&](size_t task) {
    amx::configure_tiles();
    const int64_t tn = static_cast<int64_t>(task) % tasks_n, tm = static_cast<int64_t>(task) / tasks_n;
    const int64_t b_begin = tn * kTaskBlocks, b_end = std::min(n_blocks, b_begin + kTaskBlocks);
    const int64_t m_begin = tm * kTaskRows, m_end = std::min(m, m_begin + kTaskRows);
    step(b_begin, b_end, m_begin, m_end);
    _tile_release();
  });
}

// Covers rows [m_begin, m_end) x blocks [b_begin, b_end): 32-row steps over pairs of blocks, and a final
// 16-row strip (when the rows end there) over quadruples of blocks, so no tile multiplies padding rows.
template <class Step>
void cover_task(int64_t b_begin, int64_t b_end, int64_t m_begin, int64_t m_end, const Step& step) {
  for (int64_t m0 = m_begin; m0 < m_end;) {
    const int mt = m_end - m0 > kTileRows ? 2 : 1;
    const int nt = 4 / mt;
    for (int64_t b = b_begin; b < b_end; b += nt) {
      int64_t blocks[4];
      const int valid = static_cast<int>(std::min<int64_t>(nt, b_end - b));
      for (int j = 0; j < nt; ++j) blocks[j] = b + std::min(j, valid - 1);
      step(mt, m0, blocks, valid);
    }
    m0 += 16 * mt;
  }
}

}  // namespace

void gemm_int8_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool) {
  if (m <= kDecodeMaxM) {
    gemm_int8_avx512(x, m, w, y, ldy, pool);
    return;
  }
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/false, &pool, 32, quantize_row_avx512);
  const TiledActivations xt = tile_activations(a, (m + 31) / 32 * 32, pool);
  run_amx(w, m, pool, [&](int64_t b_begin, int64_t b_end, int64_t m_begin, int64_t m_end) {
    cover_task(b_begin, b_end, m_begin, m_end, [&](int mt, int64_t m0, const int64_t* blocks, int valid) {
      if (mt == 2) {
        int8_step<2>(w, a, xt, m0, blocks, valid, y, ldy, m);
      } else {
        int8_step<1>(w, a, xt, m0, blocks, valid, y, ldy, m);
      }
    });
  });
}

void gemm_w4a8_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool) {
  if (m <= kDecodeMaxM) {
    gemm_w4a8_avx512(x, m, w, y, ldy, pool);
    return;
  }
  // No group sums: the unpacked weights carry their zero point.
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/false, &pool, 32, quantize_row_avx512);
  const TiledActivations xt = tile_activations(a, (m + 31) / 32 * 32, pool);
  run_amx(w, m, pool, [&](int64_t b_begin, int64_t b_end, int64_t m_begin, int64_t m_end) {
    // Over kStreamRows rows, the task's blocks as bytes, reused by every step (kTaskBlocks x 16 x k_pad
    // bytes); else unpacked a group at a time by each step.
    const bool streamed = m_end - m_begin <= kStreamRows;
    const size_t block_bytes = static_cast<size_t>(w.k_pad * kBlockRows);
    int8_t* unpacked = nullptr;
    if (!streamed) {
      unpacked = static_cast<int8_t*>(scratch(2, kTaskBlocks * block_bytes));
      for (int64_t b = b_begin; b < b_end; ++b) {
        unpack_w4a8_lines(w, b, 0, w.k_pad / 8, unpacked + (b - b_begin) * block_bytes);
      }
    }
    cover_task(b_begin, b_end, m_begin, m_end, [&](int mt, int64_t m0, const int64_t* blocks, int valid) {
      const int8_t* q[4];
      if (!streamed) {
        for (int j = 0; j < 4 / mt; ++j) q[j] = unpacked + (blocks[j] - b_begin) * block_bytes;
      }
      const int8_t* const* qs = streamed ? nullptr : q;
      if (mt == 2) {
        w4a8_step<2>(w, a, xt, m0, qs, blocks, valid, y, ldy, m);
      } else {
        w4a8_step<1>(w, a, xt, m0, qs, blocks, valid, y, ldy, m);
      }
    });
  });
}

}  // namespace spark::kernels
