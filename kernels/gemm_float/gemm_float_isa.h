// Per-instruction-set bodies of gemm_float, each compiled in its own translation unit with its own
// target flags; only dispatch.cpp calls them, and only after the probe says the CPU has the ISA.
#pragma once

#include "gemm_float/gemm_float.h"

namespace spark::kernels {

// Up to this many activation rows gemm_float streams weight rows into dot products with every row in
// registers; above, it widens weight panels once per K block for a 12 x 32 (AVX-512) or 6 x 16 (AVX2)
// register tile. Beyond 4 rows the dots run in chunks of at most 4 rows over 16 weight rows at a time,
// so the chunks after the first read those rows from cache (cpu/decode_rows.h, row_dot_chunks). The
// bounds are where the panels caught up on the 1.7B's shapes, 2 threads, weights from memory (AMD EPYC
// Zen 5 class, bench/RESULTS.md session 28): AVX-512 bf16 and f16 2.3-3.7x faster at 8 rows, 1.2-1.35x
// and 1.05-1.17x at 64; f32 1.0-1.1x at 48; AVX2 1.06-1.35x at 12 rows, 0.9-1.3x at 16.
constexpr int64_t float_row_dots_max_m(FloatDType dtype, bool avx512) {
  if (!avx512) return 12;
  return dtype == FloatDType::kF32 ? 48 : 64;
}

void gemm_float_avx2(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool);
void gemm_float_avx512(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool);

}  // namespace spark::kernels
