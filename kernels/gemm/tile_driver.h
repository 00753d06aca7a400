// Work split shared by the blocked-layout kernels (int8, W4A8, W4A16 decode): a kernel provides
// register-tiled tiles of MR activation rows x NB blocks of 16 weight rows over the full K, and this
// driver covers y with them.
//  - m <= kDecodeMaxM (decode, output head): one tile row of MR = m covers all activation rows, so each
//    weight byte is read once; tasks are about 256 KiB of weights (4 to 16 blocks) along N.
//  - larger m (prefill): tasks are 64 activation rows x 64 weight rows; inside a task the 64 weight rows
//    (at most a few hundred KiB) stay in L2 while tiles of kPrefillMr rows sweep them.
// Included by per-ISA translation units; everything here has internal linkage.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "cpu/decode_rows.h"
#include "gemm/gemm_isa.h"
#include "gemm/layout.h"

namespace spark::kernels {
namespace {

struct TileContext {
  const QuantizedWeight& w;
  const QuantizedActivations* a;  // integer formats
  // f32 activations (row stride ldx); for W4A16's AVX2 integer tiles, their int16 grids (gemm_w4a16_grid)
  const float* x;
  int64_t ldx;
  // W4A16: [m][groups] Σ x over each group (the AVX2 integer tiles: u, u · 2^-15, Σ x per group)
  const float* x_group_sums;
  float* y;
  int64_t ldy;
  PanelPrefetch prefetch;  // set by run_small_batch_tiles; the tiles that take it ask for these lines
  // Tiles of MR <= kDecodeMaxM rows read blocks b0, b0 + block_stride, ..., b0 + (NB - 1) · block_stride.
  // Only run_tiles' decode tasks set it; the prefill and small-batch paths (whose row tails may also be
  // MR <= kDecodeMaxM) keep 1, i.e. NB consecutive blocks.
  int64_t block_stride = 1;
};

// Blocks between a tile's blocks: block_stride for tiles of up to kDecodeMaxM rows, 1 for larger ones.
template <int MR>
inline int64_t tile_block_stride(const TileContext& c) {
  return MR <= kDecodeMaxM ? c.block_stride : 1;
}

// Computes activation rows [m0, m0 + MR) x weight blocks b0 + b · tile_block_stride<MR>(c), b in [0, NB).
using TileFn = void (*)(const TileContext& c, int64_t m0, int64_t b0);

template <class Kernel, int NB, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_row(std::index_sequence<I...>) {
  return {&Kernel::template tile<static_cast<int>(I) + 1, NB>...};
}

template <class Kernel, int MRS, size_t... NB>
constexpr std::array<std::array<TileFn, MRS>, sizeof...(NB)> tile_table(std::index_sequence<NB...>) {
  return {tile_row<Kernel, static_cast<int>(NB) + 1>(std::make_index_sequence<MRS>{})...};
}

// Tables indexed [nb - 1][mr - 1]. A Kernel declares its widest tiles: kDecodeNb blocks for m <=
// kDecodeMaxM rows, kPrefillNb blocks x kPrefillMr rows otherwise (bounded by its register file). A
// kernel whose register file holds kDecodeNb blocks only at a few rows also declares decode_nb(m), the
// blocks of its decode tiles at m rows.
template <class Kernel>
struct TileTables {
  static constexpr auto decode =
      tile_table<Kernel, kDecodeMaxM>(std::make_index_sequence<Kernel::kDecodeNb>{});
  static constexpr auto prefill =
      tile_table<Kernel, Kernel::kPrefillMr>(std::make_index_sequence<Kernel::kPrefillNb>{});
};

template <class Kernel>
constexpr int64_t decode_blocks(int64_t m) {
  if constexpr (requires { Kernel::decode_nb(m); }) {
    return Kernel::decode_nb(m);
  } else {
    return Kernel::kDecodeNb;
  }
}

// A small batch (5 to kPanelPrefetchMaxM rows, many sequences decoding at once) on a kernel whose tiles take
// a PanelPrefetch: every weight comes from memory once and is used by a few row tiles only, so the first tile
// of each panel (kPrefillNb blocks) waited on memory while the rest ran from cache, and the two did not
// overlap (int8 and W4A8 at 16 rows: 38-50% of the dot-product peak against 56-75% at 512; bench/RESULTS.md,
// session 29). Here all row tiles run on one panel before the next, and meanwhile ask for the next panel's
// lines, up to Kernel::kPanelPrefetchLines per K step, so the memory reads are spread over the compute. Tasks
// of 16 blocks: one cold panel in 8.
template <class Kernel>
void run_small_batch_tiles(const TileContext& c, int64_t m, ThreadPool& pool) {
  constexpr int64_t kTaskBlocks = 16;
  const int64_t n_blocks = c.w.n_pad / kBlockRows;
  const auto block_bytes = static_cast<int64_t>(layout::qweight_bytes(c.w.format, kBlockRows, c.w.k_pad));
  const auto* weights = static_cast<const char*>(c.w.qweight);
  const int64_t tiles = (m + Kernel::kPrefillMr - 1) / Kernel::kPrefillMr;
  const int64_t tile_rows = (m + tiles - 1) / tiles;
  // A panel holds one 64-byte line per block per K step of a tile; each row tile asks for its share of the
  // next panel.
  const int lines = static_cast<int>(
      std::min<int64_t>(Kernel::kPanelPrefetchLines, (Kernel::kPrefillNb + tiles - 1) / tiles));
  const int64_t tasks = (n_blocks + kTaskBlocks - 1) / kTaskBlocks;
  pool.run(static_cast<size_t>(tasks), [&](size_t task) {
    const int64_t b_begin = static_cast<int64_t>(task) * kTaskBlocks;
    const int64_t b_end = std::min(n_blocks, b_begin + kTaskBlocks);
    TileContext tc = c;
    for (int64_t b = b_begin; b < b_end; b += Kernel::kPrefillNb) {
      const int64_t nb = std::min<int64_t>(Kernel::kPrefillNb, b_end - b);
      const char* next = weights + (b + nb) * block_bytes;
      const int64_t next_bytes = (std::min(b_end, b + nb + Kernel::kPrefillNb) - (b + nb)) * block_bytes;
      for (int64_t m0 = 0, t = 0; m0 < m; m0 += tile_rows, ++t) {
        tc.prefetch = panel_share(next, next_bytes, tiles, t, lines);
        TileTables<Kernel>::prefill[nb - 1][std::min(tile_rows, m - m0) - 1](tc, m0, b);
      }
    }
  });
}

template <class Kernel>
void run_tiles(const TileContext& c, int64_t m, ThreadPool& pool) {
  const int64_t n_blocks = c.w.n_pad / kBlockRows;
  if (m <= kDecodeMaxM) {
    // About 256 KiB of weights a task (16 blocks of W4A8 / W4A16 at K = 2,048, 8 of int8, 4 at K = 6,656),
    // read as one run of addresses: with 4 blocks (one tile) a task the two threads took turns at tiles,
    // and W4A8 / W4A16 decode streamed 0.7-1.0x the bytes per second (bench/RESULTS.md, session 26); 8
    // blocks were slower than 16, and 32, 64 or one even share per thread no faster (with consecutive
    // tiles; with the strided tiles below, 64 and more were within this VM's noise, session 40). The last
    // 8 blocks per thread (and what the task size does not divide) go in tasks of 4 again, so the threads
    // finish together: up to 1.3x on the 2,048-row shapes.
    constexpr int64_t kTailTaskBlocks = 4;
    const auto block_bytes =
        std::max<int64_t>(1, static_cast<int64_t>(layout::qweight_bytes(c.w.format, kBlockRows, c.w.k_pad)));
    const int64_t task_blocks = std::clamp<int64_t>((int64_t{256} << 10) / block_bytes / 4 * 4, 4, 16);
    const int64_t tail = std::min<int64_t>(n_blocks, 2 * kTailTaskBlocks * pool.size());
    const int64_t big_tasks = (n_blocks - tail) / task_blocks;
    const int64_t big_end = big_tasks * task_blocks;
    const int64_t decode_tasks = big_tasks + (n_blocks - big_end + kTailTaskBlocks - 1) / kTailTaskBlocks;
    pool.run(static_cast<size_t>(decode_tasks), [&](size_t task_index) {
      const auto task = static_cast<int64_t>(task_index);
      const int64_t b_begin =
          task < big_tasks ? task * task_blocks : big_end + (task - big_tasks) * kTailTaskBlocks;
      const int64_t b_end = std::min(n_blocks, b_begin + (task < big_tasks ? task_blocks : kTailTaskBlocks));
      const int64_t nb = decode_blocks<Kernel>(m), n = b_end - b_begin;
      if (nb > 1 && n > nb && n % nb == 0) {
        // The task's blocks as nb runs of n / nb, one stream a run: tile t reads block t of each, so each
        // stream goes on through its run and its prefetch past a block's end asks for what it reads next.
        // Tiles of nb consecutive blocks made every stream one block long (16 KiB of W4A8 at K = 2,048),
        // each started cold again at the next tile: the W4A8 and W4A16 decode GEMVs took 1.1-1.3x the
        // time (bench/RESULTS.md, session 40).
        TileContext strided = c;
        strided.block_stride = n / nb;
        for (int64_t t = 0; t < n / nb; ++t)
          TileTables<Kernel>::decode[nb - 1][m - 1](strided, 0, b_begin + t);
        return;
      }
      for (int64_t b = b_begin; b < b_end; b += nb) {
        TileTables<Kernel>::decode[std::min<int64_t>(nb, b_end - b) - 1][m - 1](c, 0, b);
      }
    });
    return;
  }
  constexpr int64_t kTaskBlocks = 4, kTaskRows = 64;
  if constexpr (requires { Kernel::kPanelPrefetchLines; }) {
    static_assert(kPanelPrefetchMaxM <= kTaskRows);
    if (m <= kPanelPrefetchMaxM) return run_small_batch_tiles<Kernel>(c, m, pool);
  }
  const int64_t tasks_n = (n_blocks + kTaskBlocks - 1) / kTaskBlocks;
  const int64_t tasks_m = (m + kTaskRows - 1) / kTaskRows;
  pool.run(static_cast<size_t>(tasks_n * tasks_m), [&](size_t task) {
    const int64_t tn = static_cast<int64_t>(task) % tasks_n, tm = static_cast<int64_t>(task) / tasks_n;
    const int64_t b_begin = tn * kTaskBlocks, b_end = std::min(n_blocks, b_begin + kTaskBlocks);
    const int64_t m_begin = tm * kTaskRows, m_end = std::min(m, m_begin + kTaskRows);
    // Rows split into tiles of near-equal height (16 rows with kPrefillMr = 12: 8 + 8, not 12 + 4), so
    // a small batch does not end on a tile that reuses each unpacked weight line for a few rows only.
    for (int64_t m0 = m_begin, mr = 0; m0 < m_end; m0 += mr) {
      const int64_t left = m_end - m0, tiles = (left + Kernel::kPrefillMr - 1) / Kernel::kPrefillMr;
      mr = (left + tiles - 1) / tiles;
      for (int64_t b = b_begin; b < b_end; b += Kernel::kPrefillNb) {
        TileTables<Kernel>::prefill[std::min<int64_t>(Kernel::kPrefillNb, b_end - b) - 1][mr - 1](c, m0, b);
      }
    }
  });
}

}  // namespace
}  // namespace spark::kernels
