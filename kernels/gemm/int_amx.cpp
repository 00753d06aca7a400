// AMX kernels of the integer formats for m > kDecodeMaxM (decode stays on the AVX-512 VNNI GEMV, which is
// bandwidth-bound anyway). One tdpbssd / tdpbsud multiplies a 16 x 64 int8 activation tile by a 64 x 16
// weight tile into 16 x 16 s32: 16 times the multiply-adds of a vpdpbusd per instruction.
//  - kInt8: the packed layout's 64-byte lines (4 k of 16 rows) are exactly the rows of an AMX B tile, so
//    16 consecutive lines of a block are loaded straight from the weight (stride 64); activations are
//    signed, so tdpbssd needs no correction.
//  - kW4A8: each task unpacks its weight blocks once into bytes q in [0, 15] (same line layout) and uses
//    tdpbsud (signed activations x unsigned weights); per group of 128 the s32 tile is combined as in
//    gemm_ref (subtract 8 · Σ x, fma with the group scale).
// Each task covers 32 activation rows x 32 weight rows per step with four accumulator tiles. Activations
// are padded with zero rows to a multiple of 32, so every tile load is full.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gemm/gemm_isa.h"

namespace spark::kernels {

namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kTaskRows = 64;   // activation rows per task
constexpr int64_t kTaskBlocks = 4;  // weight blocks (16 rows each) per task

// Tiles 0-3: C (s32 accumulators, rows x 64 bytes); 4-5: A (activations); 6-7: B (weights).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = kTileRows;
  }
  _tile_loadconfig(&cfg);
}

inline __mmask16 lane_mask(int64_t valid) {
  if (valid <= 0) return 0;
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1);
}

// Stores the four accumulator tiles as c[32][32] s32.
inline void store_accumulators(int32_t* c) {
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 16, 128);
  _tile_stored(2, c + 16 * 32, 128);
  _tile_stored(3, c + 16 * 32 + 16, 128);
}

// Rows [m0, m0 + 32) x blocks b0, b0 + 1 (b1 may equal b0 when the task has an odd block count; its
// results are then not stored).
void int8_step(const QuantizedWeight& w, const QuantizedActivations& a, int64_t m0, int64_t b0, int64_t b1,
               float* y, int64_t ldy, int64_t m) {
  const int64_t block_bytes = w.k_pad * kBlockRows;
  const auto* wq0 = static_cast<const int8_t*>(w.qweight) + b0 * block_bytes;
  const auto* wq1 = static_cast<const int8_t*>(w.qweight) + b1 * block_bytes;
  const int8_t* x0 = a.q + m0 * a.k_pad;
  const int8_t* x1 = x0 + kTileRows * a.k_pad;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t kt = 0; kt < w.k_pad / 64; ++kt) {
    _tile_loadd(4, x0 + kt * 64, a.k_pad);
    _tile_loadd(5, x1 + kt * 64, a.k_pad);
    _tile_loadd(6, wq0 + kt * 1024, 64);
    _tile_loadd(7, wq1 + kt * 1024, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) int32_t c[32 * 32];
  store_accumulators(c);
  const auto* scales = static_cast<const float*>(w.scales);
  for (int half = 0; half < (b1 != b0 ? 2 : 1); ++half) {
    const int64_t n0 = (half ? b1 : b0) * kBlockRows;
    const __mmask16 mask = lane_mask(w.n - n0);
    const __m512 sv = _mm512_loadu_ps(scales + n0);
    for (int64_t r = 0; r < 32 && m0 + r < m; ++r) {
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + r * 32 + half * 16)), sv);
      v = _mm512_mul_ps(v, _mm512_set1_ps(a.scale[m0 + r]));
      _mm512_mask_storeu_ps(y + (m0 + r) * ldy + n0, mask, v);
    }
  }
}

// Unpacks W4A8 block b into bytes: line kq of the result holds k = 4kq..4kq+3 of the block's 16 rows.
void unpack_w4a8_block(const QuantizedWeight& w, int64_t b, uint8_t* out) {
  const int64_t block_bytes = w.k_pad * kBlockRows / 2;
  const auto* src = static_cast<const uint8_t*>(w.qweight) + b * block_bytes;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t p = 0; p < w.k_pad / 8; ++p) {
    const __m512i raw = _mm512_loadu_si512(src + p * 64);
    _mm512_store_si512(out + 2 * p * 64, _mm512_and_si512(raw, low4));
    _mm512_store_si512(out + (2 * p + 1) * 64, _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4));
  }
}

void w4a8_step(const QuantizedWeight& w, const QuantizedActivations& a, int64_t m0, const uint8_t* q0,
               const uint8_t* q1, int64_t b0, int64_t b1, float* y, int64_t ldy, int64_t m) {
  const int64_t groups = w.groups();
  const int8_t* x0 = a.q + m0 * a.k_pad;
  const int8_t* x1 = x0 + kTileRows * a.k_pad;
  const auto* scales = static_cast<const uint16_t*>(w.scales);
  alignas(64) float t[32 * 32];
  std::memset(t, 0, sizeof t);
  alignas(64) int32_t c[32 * 32];
  const int halves = b1 != b0 ? 2 : 1;
  for (int64_t g = 0; g < groups; ++g) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t kt = 2 * g; kt < 2 * g + 2; ++kt) {
      _tile_loadd(4, x0 + kt * 64, a.k_pad);
      _tile_loadd(5, x1 + kt * 64, a.k_pad);
      _tile_loadd(6, q0 + kt * 1024, 64);
      _tile_loadd(7, q1 + kt * 1024, 64);
      _tile_dpbsud(0, 4, 6);
      _tile_dpbsud(1, 4, 7);
      _tile_dpbsud(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
    }
    store_accumulators(c);
    for (int half = 0; half < halves; ++half) {
      const int64_t b = half ? b1 : b0;
      const __m512 s = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + (b * groups + g) * kBlockRows)));
      for (int64_t r = 0; r < 32; ++r) {
        const __m512i corr = _mm512_sub_epi32(_mm512_load_si512(c + r * 32 + half * 16),
                                              _mm512_set1_epi32(8 * a.group_sums[(m0 + r) * groups + g]));
        float* tr = t + r * 32 + half * 16;
        _mm512_store_ps(tr, _mm512_fmadd_ps(_mm512_cvtepi32_ps(corr), s, _mm512_load_ps(tr)));
      }
    }
  }
  for (int half = 0; half < halves; ++half) {
    const int64_t n0 = (half ? b1 : b0) * kBlockRows;
    const __mmask16 mask = lane_mask(w.n - n0);
    for (int64_t r = 0; r < 32 && m0 + r < m; ++r) {
      const __m512 v = _mm512_mul_ps(_mm512_load_ps(t + r * 32 + half * 16), _mm512_set1_ps(a.scale[m0 + r]));
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
    configure_tiles();
    const int64_t tn = static_cast<int64_t>(task) % tasks_n, tm = static_cast<int64_t>(task) / tasks_n;
    const int64_t b_begin = tn * kTaskBlocks, b_end = std::min(n_blocks, b_begin + kTaskBlocks);
    const int64_t m_begin = tm * kTaskRows, m_end = std::min(m, m_begin + kTaskRows);
    step(b_begin, b_end, m_begin, m_end);
    _tile_release();
  });
}

}  // namespace

void gemm_int8_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool) {
  if (m <= kDecodeMaxM) {
    gemm_int8_avx512(x, m, w, y, ldy, pool);
    return;
  }
  const QuantizedActivations a = quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/false, &pool, 32);
  run_amx(w, m, pool, [&](int64_t b_begin, int64_t b_end, int64_t m_begin, int64_t m_end) {
    for (int64_t m0 = m_begin; m0 < m_end; m0 += 32) {
      for (int64_t b = b_begin; b < b_end; b += 2)
        int8_step(w, a, m0, b, std::min(b + 1, b_end - 1), y, ldy, m);
    }
  });
}

void gemm_w4a8_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool) {
  if (m <= kDecodeMaxM) {
    gemm_w4a8_avx512(x, m, w, y, ldy, pool);
    return;
  }
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, w.groups(), /*offset128=*/false, &pool, 32);
  run_amx(w, m, pool, [&](int64_t b_begin, int64_t b_end, int64_t m_begin, int64_t m_end) {
    // The task's blocks as bytes, reused by every 32-row step (kTaskBlocks x 16 x k_pad bytes).
    thread_local std::vector<uint8_t> unpacked_storage;
    const size_t block_bytes = static_cast<size_t>(w.k_pad * kBlockRows);
    unpacked_storage.resize(kTaskBlocks * block_bytes + 64);
    auto* unpacked = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(unpacked_storage.data()) + 63) &
                                                ~uintptr_t{63});
    for (int64_t b = b_begin; b < b_end; ++b) unpack_w4a8_block(w, b, unpacked + (b - b_begin) * block_bytes);
    for (int64_t m0 = m_begin; m0 < m_end; m0 += 32) {
      for (int64_t b = b_begin; b < b_end; b += 2) {
        const int64_t b1 = std::min(b + 1, b_end - 1);
        w4a8_step(w, a, m0, unpacked + (b - b_begin) * block_bytes, unpacked + (b1 - b_begin) * block_bytes,
                  b, b1, y, ldy, m);
      }
    }
  });
}

}  // namespace spark::kernels
