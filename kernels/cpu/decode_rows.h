// What the decode bodies (a few activation rows, each weight streamed once) of every GEMM family share.
// Internal linkage: each includer is compiled with its own target flags.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "util/thread_pool.h"

namespace spark::kernels {
namespace {

// A decode body reads several weight rows or blocks side by side: streams a row or a block apart, which
// the hardware prefetchers follow less well than one sequential stream (30% less per core, measured with
// the same bytes read in the tile's order; bench/RESULTS.md, session 7). Each stream asks for its 64-byte
// line this many lines ahead, which restores the sequential rate of that pure read. 32 and 64 lines were
// slower on AVX-512 (session 17); int_avx2.cpp sets its own distance.
constexpr int64_t kDecodePrefetchLines = 16;

inline void prefetch_line(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// Which weight rows the passes of a row-dot body read, R rows (streams) a pass: pass t reads rows
// first(t) + r * step for r < rows(t). A decode task whose rows are a multiple of R (more than R) is read
// as R runs of n / R consecutive rows, one stream a run: pass t takes row t of each run, so each stream
// goes on through its run. Passes of R consecutive rows (small batches, ragged tasks) made every stream
// one row long (4 KiB of bf16 at K = 2,048), started cold again at the next pass: the bf16 decode GEMVs
// took 1.14-1.25x the time (bench/RESULTS.md, session 41), as the blocked tiles did (session 40).
struct RowPasses {
  int64_t n_begin = 0, n_end = 0, step = 1;
  int per_pass = 1;
  int64_t count() const { return step > 1 ? step : (n_end - n_begin + per_pass - 1) / per_pass; }
  int64_t first(int64_t t) const { return step > 1 ? n_begin + t : n_begin + t * per_pass; }
  int rows(int64_t t) const {
    return step > 1 ? per_pass : static_cast<int>(std::min<int64_t>(per_pass, n_end - first(t)));
  }
  // Rows between the end of a stream's row and the next row it reads.
  int64_t rows_skipped() const { return step > 1 ? 0 : per_pass - 1; }
};

enum class RowOrder { kConsecutive, kStrided };

inline RowPasses row_passes(int64_t n_begin, int64_t n_end, int per_pass, RowOrder order) {
  const int64_t n = n_end - n_begin;
  const bool strided = order == RowOrder::kStrided && n > per_pass && n % per_pass == 0;
  return {n_begin, n_end, strided ? n / per_pass : 1, per_pass};
}

// The tasks of a row-dot GEMM of m activation rows over n weight rows, fn(n_begin, n_end) each: 64 rows
// (small enough to balance 2..64 threads on the smallest Spark GEMMs). In decode (m <= kMaxRows, the bound
// of the caller's row_dot_chunks), where each task is one strided call (RowPasses),
// kDecodeTaskRows rows a task, so each stream goes on through 256 / R rows (32 at R = 8); the last 2 x 64
// rows per thread, and what 256 does not divide, still go in tasks of 64, so the threads finish together.
// With tasks of 64 rows the bf16 decode GEMVs of the 1.7B took 1.05-1.13x the time; 512 were no faster than
// 256 (bench/RESULTS.md, session 41).
template <int kMaxRows = 4, class Fn>
inline void run_row_dot_tasks(ThreadPool& pool, int64_t m, int64_t n, Fn&& fn) {
  constexpr int64_t kTaskRows = 64, kDecodeTaskRows = 256;
  const int64_t big = m <= kMaxRows ? kDecodeTaskRows : kTaskRows;
  const int64_t tail = std::min<int64_t>(n, 2 * kTaskRows * pool.size());
  const int64_t big_tasks = (n - tail) / big, big_end = big_tasks * big;
  const int64_t tasks = big_tasks + (n - big_end + kTaskRows - 1) / kTaskRows;
  pool.run(static_cast<size_t>(tasks), [&](size_t index) {
    const auto t = static_cast<int64_t>(index);
    const int64_t begin = t < big_tasks ? t * big : big_end + (t - big_tasks) * kTaskRows;
    fn(begin, std::min(n, begin + (t < big_tasks ? big : kTaskRows)));
  });
}

// Row r of a pass asks for its line kDecodePrefetchLines ahead of `offset`, and within that distance of
// its end for the start of the next row it reads, rows_skipped rows past its end (RowPasses): in passes of
// consecutive rows the line after a row's end is row r + 1's, another stream's, already read. Rows of
// 2,048 bf16 are 64 lines, so otherwise each pass started 3 of its 4 streams cold (bench/RESULTS.md,
// session 25: 1.2-1.6x the bytes per second on those shapes).
inline void prefetch_row_ahead(const void* row, int64_t offset, int64_t row_bytes, int64_t rows_skipped) {
  int64_t ahead = offset + kDecodePrefetchLines * 64;
  if (ahead >= row_bytes) ahead += rows_skipped * row_bytes;
  prefetch_line(static_cast<const char*>(row) + ahead);
}

// A tile's NB blocks (`stride` blocks apart) keep their per-group parameters (scales, minima) in runs of
// `groups` entries of `entry` elements each: a stream of their own beside the weights, which the hardware
// prefetchers follow poorly. Asks for group g + 1's entry of every block (bench/RESULTS.md, session 20);
// after a block's last group, for the first of the next block, which a strided decode tile reads next
// (except at the end of a run).
template <int NB, class T>
inline void prefetch_next_group(const T* params, int64_t groups, int64_t entry, int64_t g, int64_t stride) {
  if (g + 1 >= groups && stride == 1) return;
  for (int b = 0; b < NB; ++b) prefetch_line(params + (b * stride * groups + g + 1) * entry);
}

// body(std::integral_constant<int, M>{}) for m activation rows, 1 <= m <= kMaxRows (4 unless a body's
// registers hold more): the decode bodies are templates on their row count so the accumulators stay in
// registers.
template <int kMaxRows = 4, class Body>
inline void with_rows(int64_t m, Body&& body) {
  const int64_t rows = std::clamp<int64_t>(m, 1, kMaxRows);
  [&]<int... R>(std::integer_sequence<int, R...>) {
    (void)((rows == R + 1 && (body(std::integral_constant<int, R + 1>{}), true)) || ...);
  }
  (std::make_integer_sequence<int, kMaxRows>{});
}

// The weights a small batch reads next, asked for `lines` 64-byte lines per K step (into L2) while the
// current ones are used from cache, so memory reads overlap the arithmetic: the row-dot chunks take one
// from row_dot_chunks, the blocked tiles from run_small_batch_tiles (gemm/tile_driver.h). Empty by default.
struct PanelPrefetch {
  const char* next = nullptr;
  const char* end = nullptr;
  int lines = 0;
};

inline void prefetch_panel_step(const char*& next, const char* end, int lines) {
  for (int j = 0; j < lines && next < end; ++j, next += 64) _mm_prefetch(next, _MM_HINT_T1);
}

// Part `part` of `parts` near-equal, line-aligned shares of the `bytes` bytes from `next`: the caller's
// consumers (row-dot chunks, row tiles) each ask for one, so together they ask for every line once.
inline PanelPrefetch panel_share(const char* next, int64_t bytes, int64_t parts, int64_t part, int lines) {
  const int64_t share = (bytes / parts + 63) / 64 * 64;
  return {next + std::min(bytes, part * share), next + std::min(bytes, (part + 1) * share), lines};
}

// Up to this many activation rows row_dot_chunks asks for the next run of weight rows (see below).
constexpr int64_t kRowChunksPrefetchMaxM = 16;

// Row dots for m activation rows over a task's weight rows [n_begin, n_end): body(i0, rows, n0, n1,
// prefetch, order), rows an integral_constant, computes activation rows [i0, i0 + rows) against weight
// rows [n0, n1) in the given RowOrder. Up to kMaxRows rows (decode) that is one strided call over the whole
// range. A small batch goes in chunks of at most kMaxRows rows (near-equal: with 4, 6 rows are 3 + 3) over
// runs of 16 weight rows, every chunk per run, so each run comes from memory once and from cache for the
// other chunks. Given the weights (rows of row_bytes) and at most kRowChunksPrefetchMaxM activation rows,
// each chunk also gets its share of the next run to ask for (PanelPrefetch), so that run's memory reads
// overlap the arithmetic instead of stalling the next run's first chunk; a body reads 64 bytes of each of
// its 4 weight rows per K step, so ceil(4 / chunks) lines a step cover its share. AVX-512 bf16 rows (f32
// products and vdpbf16ps), 2 threads, the 1.7B's shapes, old / new medians of six alternated rounds:
// 0.97-1.16x at 8 and 16 rows, 0.91-1.11x at 32 (so not past 16); the f32 rows ran 0.83-0.97x with it and
// take no weights (bench/RESULTS.md, session 30).
template <int kMaxRows = 4, class Body>
inline void row_dot_chunks(int64_t m, int64_t n_begin, int64_t n_end, const void* weights, int64_t row_bytes,
                           Body&& body) {
  if (m <= kMaxRows) {
    with_rows<kMaxRows>(
        m, [&](auto r) { body(int64_t{0}, r, n_begin, n_end, PanelPrefetch{}, RowOrder::kStrided); });
    return;
  }
  constexpr int64_t kRun = 16;
  const int64_t chunks = (m + kMaxRows - 1) / kMaxRows;
  const int lines = static_cast<int>((4 + chunks - 1) / chunks);
  const auto* base = static_cast<const char*>(weights);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kRun) {
    const int64_t n1 = std::min(n_end, n0 + kRun);
    const int64_t next_bytes =
        weights == nullptr || m > kRowChunksPrefetchMaxM ? 0 : (std::min(n_end, n1 + kRun) - n1) * row_bytes;
    const char* next = base + n1 * row_bytes;
    for (int64_t c = 0, i0 = 0; c < chunks; ++c) {
      const int64_t rows = (m - i0 + chunks - c - 1) / (chunks - c);
      const PanelPrefetch pf = panel_share(next, next_bytes, chunks, c, lines);
      with_rows<kMaxRows>(rows, [&](auto r) { body(i0, r, n0, n1, pf, RowOrder::kConsecutive); });
      i0 += rows;
    }
  }
}

}  // namespace
}  // namespace spark::kernels
