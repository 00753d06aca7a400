// Per-instruction-set bodies of gemm_float, each compiled in its own translation unit with its own
// target flags; only dispatch.cpp calls them, and only after the probe says the CPU has the ISA.
#pragma once

#include "gemm_float/gemm_float.h"

namespace spark::kernels {

// The AVX2 row dots take chunks of up to this many activation rows: 6 x 2 accumulators, 2 widened weight
// vectors and the activation fit the 16 registers, and each widened weight vector serves 6 rows instead
// of 4 (bench/RESULTS.md, session 31, per-shape medians: f32 1.08-1.25x and bf16 0.96-1.28x at 5-6 rows,
// 1.04-1.12x and 0.97-1.11x at 10-12).
constexpr int kFloatAvx2ChunkRows = 6;

// Up to this many activation rows gemm_float streams weight rows into dot products with every row in
// registers; above, it widens weight panels once per K block for a 12 x 32 (AVX-512) or 6 x 16 (AVX2)
// register tile. Beyond 4 rows the dots run in chunks of at most 4 rows (AVX2: kFloatAvx2ChunkRows) over
// 16 weight rows at a time, so the chunks after the first read those rows from cache (cpu/decode_rows.h,
// row_dot_chunks). The bounds are where the panels caught up on the 1.7B's shapes, 2 threads, weights
// from memory (AMD EPYC Zen 5 class, bench/RESULTS.md sessions 28 and 31): AVX-512 bf16 and f16 2.3-3.7x
// faster at 8 rows, 1.2-1.35x and 1.05-1.17x at 64; f32 1.0-1.1x at 48; AVX2 with 6-row chunks, bf16 and
// f32 1.21-1.35x over the four layer shapes at 16 rows (1.11-1.20x at 24, but the output head 0.88-0.98x
// at 16 already), f16 1.02-1.04x at 16 and 0.90-0.93x at 24.
constexpr int64_t float_row_dots_max_m(FloatDType dtype, bool avx512) {
  if (!avx512) return 16;
  return dtype == FloatDType::kF32 ? 48 : 64;
}

void gemm_float_avx2(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool);
void gemm_float_avx512(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool);

}  // namespace spark::kernels
