// What the decode bodies (a few activation rows, each weight streamed once) of every GEMM family share.
// Internal linkage: each includer is compiled with its own target flags.
#pragma once

#include <xmmintrin.h>

#include <cstdint>
#include <type_traits>

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

// A tile's NB blocks keep their per-group parameters (scales, minima) in runs of `groups` entries of
// `entry` elements each: a stream of their own beside the weights, which the hardware prefetchers
// follow poorly. Asks for group g + 1's entry of every block (bench/RESULTS.md, session 20).
template <int NB, class T>
inline void prefetch_next_group(const T* params, int64_t groups, int64_t entry, int64_t g) {
  if (g + 1 >= groups) return;
  for (int b = 0; b < NB; ++b) prefetch_line(params + (b * groups + g + 1) * entry);
}

// body(std::integral_constant<int, M>{}) for m activation rows, 1 <= m <= 4: the decode bodies are
// templates on their row count so the accumulators stay in registers.
template <class Body>
inline void with_rows(int64_t m, Body&& body) {
  switch (m) {
    case 1:
      body(std::integral_constant<int, 1>{});
      break;
    case 2:
      body(std::integral_constant<int, 2>{});
      break;
    case 3:
      body(std::integral_constant<int, 3>{});
      break;
    default:
      body(std::integral_constant<int, 4>{});
      break;
  }
}

}  // namespace
}  // namespace spark::kernels
