// The one AMX tile configuration the kernels here use: palette 1, tiles 0-7 each 16 rows x 64 bytes (C
// tiles of 16 x 16 s32 / f32, A and B tiles of 16 x 64 bytes). Include only from translation units
// compiled with the AMX flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace spark::kernels::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration on the calling thread (tile state is per thread; _tile_release() ends it).
inline void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

}  // namespace spark::kernels::amx
