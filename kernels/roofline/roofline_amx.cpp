// AMX inner loops of the roofline: tile products into four independent accumulators (the AMX kernels'
// own 2 x 2 arrangement of tiles 0-3 from A tiles 4-5 and B tiles 6-7), reloading no operand, so the
// rate is the tile unit's own.
#include <immintrin.h>

#include <cstring>

#include "cpu/amx_tiles.h"
#include "roofline/roofline_isa.h"

namespace spark::kernels {

namespace {

// Tiles 0-3 zeroed, A tiles 4-5 and B tiles 6-7 loaded from `operand` (16 x 64 bytes); then `iters` rounds
// of four independent products (the kernels' 2 x 2 arrangement); tile 0 is stored to c. Returns the
// products done.
template <class Product>
double tile_loop(int64_t iters, const void* operand, void* c, const Product& product) {
  amx::configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (int64_t i = 0; i < iters; ++i) product();
  _tile_stored(0, c, 64);
  _tile_release();
  return static_cast<double>(iters) * 4;
}

}  // namespace

double amx_int8_loop(int64_t iters, int32_t* sink) {
  alignas(64) int8_t operand[16 * 64];
  std::memset(operand, 1, sizeof operand);
  alignas(64) int32_t c[16 * 16];
  const double products = tile_loop(iters, operand, c, [] {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  });
  *sink = c[0];
  // Each product: 16 x 16 outputs, 64 multiply-adds each, 2 ops per multiply-add.
  return products * 16 * 16 * 64 * 2;
}

double amx_int8_fed_loop(int64_t iters, const int8_t* tiles, size_t n_tiles, int32_t* sink) {
  amx::configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  size_t t = 0;
  for (int64_t i = 0; i < iters; ++i) {
    // Four consecutive tiles of the buffer: the kernels' 2 x 2 step reads two A and two B tiles per round.
    _tile_loadd(4, tiles + t * 1024, 64);
    _tile_loadd(5, tiles + (t + 1) * 1024, 64);
    _tile_loadd(6, tiles + (t + 2) * 1024, 64);
    _tile_loadd(7, tiles + (t + 3) * 1024, 64);
    t = t + 4 < n_tiles ? t + 4 : 0;
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) int32_t c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  *sink = c[0];
  return static_cast<double>(iters) * 4 * 16 * 16 * 64 * 2;
}

double amx_bf16_loop(int64_t iters, float* sink) {
  alignas(64) uint16_t operand[16 * 32];
  for (uint16_t& v : operand) v = 0x3f80;  // 1.0
  alignas(64) float c[16 * 16];
  const double products = tile_loop(iters, operand, c, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
  *sink = c[0];
  // Each product: 16 x 16 outputs, 32 multiply-adds each.
  return products * 16 * 16 * 32 * 2;
}

}  // namespace spark::kernels
