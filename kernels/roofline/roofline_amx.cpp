// AMX inner loops of the roofline: tile products into four independent accumulators (the AMX kernels'
// own 2 x 2 arrangement of tiles 0-3 from A tiles 4-5 and B tiles 6-7), reloading no operand, so the
// rate is the tile unit's own.
#include <immintrin.h>

#include <cstring>

#include "roofline/roofline_isa.h"

namespace spark::kernels {

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-7 as 16 rows x 64 bytes; A and B loaded from `operand` (16 x 64 bytes).
void load_tiles(const void* operand) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
}

}  // namespace

double amx_int8_loop(int64_t iters, int32_t* sink) {
  alignas(64) int8_t operand[16 * 64];
  std::memset(operand, 1, sizeof operand);
  load_tiles(operand);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) int32_t c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  *sink = c[0];
  // Each product: 16 x 16 outputs, 64 multiply-adds each, 2 ops per multiply-add.
  return static_cast<double>(iters) * 4 * 16 * 16 * 64 * 2;
}

double amx_bf16_loop(int64_t iters, float* sink) {
  alignas(64) uint16_t operand[16 * 32];
  for (uint16_t& v : operand) v = 0x3f80;  // 1.0
  load_tiles(operand);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  *sink = c[0];
  // Each product: 16 x 16 outputs, 32 multiply-adds each.
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}

}  // namespace spark::kernels
