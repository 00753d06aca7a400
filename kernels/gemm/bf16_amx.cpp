// AMX-BF16 kernel for bf16 weights with bf16_activations and m > kDecodeMaxM (decode stays on the
// AVX512-BF16 row dots). tdpbf16ps multiplies a 16 x 32 bf16 activation tile by a 32 x 16 weight tile
// into 16 x 16 f32: 8192 multiply-adds, where a vdpbf16ps does 32.
// Weights stay in the checkpoint's row-major layout; each task re-lays the 32 weight rows it owns as B
// tiles (pairs of k for 16 rows per 64-byte line, a 16 x 16 transpose of 32-bit pairs) and sweeps up to
// kTaskRows activation rows over them, so the repacking is paid once per 256 rows.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/amx_tiles.h"
#include "gemm/gemm_isa.h"
#include "gemm_float/panel_avx512.h"

namespace spark::kernels {

namespace {

constexpr int64_t kTaskRows = 256;  // activation rows per task
constexpr int64_t kTaskCols = 32;   // weight rows per task (two B tiles)

// Tiles (amx::configure_tiles) 0-3: C (16 x 16 f32); 4-5: A (16 rows x 32 bf16); 6-7: B (16 pair-rows x
// 16 columns).

// x [m][k] f32 -> A tiles: tile (mt, kt) holds rows 16mt.. x bf16 elements 32kt.. at (mt · KT + kt) · 1024
// bytes. Rows past m and columns past k are zero. Scratch slot 1.
const uint16_t* tile_activations(const float* x, int64_t m, int64_t k, int64_t m_tiles, int64_t kt_count,
                                 ThreadPool& pool) {
  auto* out = static_cast<uint16_t*>(scratch(1, static_cast<size_t>(m_tiles * kt_count) * 1024));
  pool.run(static_cast<size_t>(m_tiles), [&](size_t task) {
    const int64_t mt = static_cast<int64_t>(task);
    for (int64_t kt = 0; kt < kt_count; ++kt) {
      uint16_t* tile = out + (mt * kt_count + kt) * 512;
      for (int64_t r = 0; r < 16; ++r) {
        const int64_t row = mt * 16 + r, kk = kt * 32;
        __m512i v = _mm512_setzero_si512();
        if (row < m) {
          const __m512 lo = _mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk), x + row * k + kk);
          const __m512 hi = _mm512_maskz_loadu_ps(avx512::lanes_mask(k - kk - 16), x + row * k + kk + 16);
          const __m512bh packed = _mm512_cvtne2ps_pbh(hi, lo);
          std::memcpy(&v, &packed, sizeof v);
        }
        _mm512_store_si512(tile + r * 32, v);
      }
    }
  });
  return out;
}

// Packs weight rows [n0, n0 + 16) (zero past n) as B tiles: tile kt at kt · 1024 bytes, line p holding the
// k pair (32kt + 2p, +1) of the 16 rows.
void pack_b_tiles(const FloatWeight& w, int64_t n0, int64_t kt_count, uint32_t* out) {
  const auto* base = static_cast<const uint16_t*>(w.data);
  const int64_t rows = std::clamp<int64_t>(w.n - n0, 0, 16);
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    const __mmask32 mask = avx512::lanes_mask32(w.k - kt * 32);
    __m512 t[16];
    for (int64_t r = 0; r < 16; ++r) {
      t[r] = r < rows ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask, base + (n0 + r) * w.k + kt * 32))
                      : _mm512_setzero_ps();
    }
    avx512::transpose16x16(t);
    for (int p = 0; p < 16; ++p) _mm512_store_ps(reinterpret_cast<float*>(out + kt * 256 + p * 16), t[p]);
  }
}

// Writes a 16 x 16 f32 tile to y rows [m0, m0 + 16) x columns [n0, n0 + 16), clipped to m and n.
inline void store_c(const float* c, float* y, int64_t ldy, int64_t m0, int64_t n0, int64_t m, int64_t n) {
  const __mmask16 mask = avx512::lanes_mask(n - n0);
  for (int64_t r = 0; r < 16 && m0 + r < m; ++r)
    _mm512_mask_storeu_ps(y + (m0 + r) * ldy + n0, mask, _mm512_load_ps(c + r * 16));
}

}  // namespace

void gemm_bf16_amx(const float* x, int64_t m, const QuantizedWeight& qw, float* y, int64_t ldy,
                   ThreadPool& pool) {
  if (m <= kDecodeMaxM) {
    gemm_bf16dot_avx512(x, m, qw, y, ldy, pool);
    return;
  }
  const FloatWeight w = qw.as_float();
  const int64_t kt_count = (w.k + 31) / 32;
  const int64_t m_tiles = (m + 31) / 32 * 2;  // even, so 32-row steps never run past the tiles
  const uint16_t* xt = tile_activations(x, m, w.k, m_tiles, kt_count, pool);
  const int64_t tasks_n = (w.n + kTaskCols - 1) / kTaskCols;
  const int64_t tasks_m = (m + kTaskRows - 1) / kTaskRows;
  pool.run(static_cast<size_t>(tasks_n * tasks_m), [&](size_t task) {
    const int64_t tn = static_cast<int64_t>(task) % tasks_n, tm = static_cast<int64_t>(task) / tasks_n;
    const int64_t n0 = tn * kTaskCols;
    const int64_t m_begin = tm * kTaskRows, m_end = std::min(m, m_begin + kTaskRows);
    auto* b = static_cast<uint32_t*>(scratch(2, static_cast<size_t>(2 * kt_count) * 1024));
    pack_b_tiles(w, n0, kt_count, b);
    pack_b_tiles(w, n0 + 16, kt_count, b + kt_count * 256);
    amx::configure_tiles();
    alignas(64) float c[4][256];
    for (int64_t m0 = m_begin; m0 < m_end; m0 += 32) {
      const uint16_t* a0 = xt + (m0 / 16) * kt_count * 512;
      const uint16_t* a1 = a0 + kt_count * 512;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t kt = 0; kt < kt_count; ++kt) {
        _tile_loadd(4, a0 + kt * 512, 64);
        _tile_loadd(5, a1 + kt * 512, 64);
        _tile_loadd(6, b + kt * 256, 64);
        _tile_loadd(7, b + (kt_count + kt) * 256, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c[0], 64);
      _tile_stored(1, c[1], 64);
      _tile_stored(2, c[2], 64);
      _tile_stored(3, c[3], 64);
      store_c(c[0], y, ldy, m0, n0, m, w.n);
      store_c(c[1], y, ldy, m0, n0 + 16, m, w.n);
      store_c(c[2], y, ldy, m0 + 16, n0, m, w.n);
      store_c(c[3], y, ldy, m0 + 16, n0 + 16, m, w.n);
    }
    _tile_release();
  });
}

}  // namespace spark::kernels
