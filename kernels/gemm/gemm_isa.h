// Per-instruction-set bodies of gemm() for the quantized formats, each in its own translation unit
// compiled with its own target flags. Only dispatch.cpp (and the tests, after checking cpu_supports)
// call them. Every body picks its decode or prefill shape from m with the constants below, which the
// path report quotes.
#pragma once

#include "gemm/activations.h"
#include "gemm/weight.h"

namespace spark::kernels {

// Up to this many activation rows a GEMM streams each weight once and reuses it from registers for
// every row (decode, the output head, small batches); above, it works on M x N tiles.
constexpr int64_t kDecodeMaxM = 4;

// The f32 W4A16 bodies (AVX2, and AVX-512 without BF16) keep their register tiles (4 rows at a time over
// tasks of 64 rows x 4 blocks) up to this many rows, above the dequantized f32 panels. 2 threads, the
// 1.7B's shapes, weights from memory (bench/RESULTS.md, session 28): AVX2 tiles 1.8x at 8 rows, 1.3x at
// 16, 1.2x at 32, about even at 128; AVX-512 tiles 1.02-1.35x at 8 rows, even at 16, slower from 32.
constexpr int64_t w4a16_f32_tiles_max_m(bool avx512) {
  return avx512 ? 8 : 64;
}

// The AVX2 W4A16 body multiplies 1 and 2 rows in integers (each group's bf16 activations split into two
// 16-bit grids, exact down to 2^-22 of its largest; vpmaddwd on the nibbles: gemm/w4a16_avx2.cpp); from 3
// rows its f32 tiles, which widen each weight once for 4 rows, issue faster (spark-kernels-bench --warm, 1
// thread, 448x1024, Zen 3 at avx2: 1 row 14.7 against 13.0 GB/s, 2 rows 8.7 against 8.6, 4 rows 4.1
// against 5.5 per row).
constexpr int64_t kW4A16Avx2GridMaxM = 2;

// The AVX-512 int8, W4A8 and W4A16 (BF16) tiles run a batch of up to this many rows (one task's rows)
// panel by panel, asking for the next panel's weights while the row tiles use the current one from cache
// (run_small_batch_tiles, gemm/tile_driver.h). 2 threads, the 1.7B's shapes, weights from memory
// (bench/RESULTS.md, session 29): W4A8 and W4A16 1.0-1.9x at 5-16 rows, int8 0.8-1.6x (0.8-1.0 on the
// 2048x6656 shape at 5-8 rows, 0.9-1.3 on the others); all 1.0-1.4x at 32; W4A8 and W4A16 about even at 64.
constexpr int64_t kPanelPrefetchMaxM = 32;

// bf16 weights on vdpbf16ps (gemm_bf16dot_avx512) keep their row dots up to this many rows, above the pair
// panels. With chunks of 4 rows the bound was 32 (session 28: 0.9-1.07x at 48); with chunks of 6 (below),
// against the panels, 2 threads, the 1.7B's shapes (bench/RESULTS.md, session 30): 1.19-1.33x at 36 rows,
// 1.10-1.15x at 64, 1.04-1.25x at 80, 1.01-1.10x at 96, 0.94-1.00x at 128.
constexpr int64_t kBf16DotRowDotsMaxM = 96;

// Those row dots run a small batch in chunks of up to this many activation rows (6 x 4 accumulators), where
// the other row dots take 4: each weight line loaded serves 6 rows instead of 4. 2 threads, the 1.7B's
// shapes, weights from memory, against chunks of 4 (bench/RESULTS.md, session 30): 1.02-1.22x at 5 and 6
// rows, 1.03-1.16x at 12, 1.00-1.16x at 24 and 32, 0.94-1.07x at 8 and 16 (8 is 4 + 4 either way); through
// the engine 1.05-1.16x at 6-24 sequences.
constexpr int kBf16DotChunkRows = 6;

using GemmFn = void (*)(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                        ThreadPool& pool);

// Scalar tier: gemm_ref's arithmetic split over the pool by output rows.
void gemm_scalar(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                 ThreadPool& pool);
// Rows [n_begin, n_end) of gemm_ref, given the activations it quantized (integer formats only).
void gemm_ref_rows(const float* x, int64_t m, const QuantizedWeight& w, const QuantizedActivations* a,
                   float* y, int64_t ldy, int64_t n_begin, int64_t n_end);

// quantize_activations' row quantizer on AVX2: the scalar one's bytes, scale and group sums exactly.
void quantize_row_avx2(const float* x, int64_t k, int64_t k_pad, int64_t groups, bool offset128, int8_t* q,
                       float* scale, int32_t* group_sums);
void gemm_int8_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                    ThreadPool& pool);
void gemm_w4a8_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                    ThreadPool& pool);
// The same tiles with AVX-VNNI's vpdpbusd on ymm (cpu_features().avx_vnni): AVX2 CPUs that have it.
void gemm_int8_avxvnni(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool);
void gemm_w4a8_avxvnni(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool);
void gemm_w4a16_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool);

// quantize_activations' row quantizer on AVX-512: the scalar one's bytes, scale and group sums exactly.
void quantize_row_avx512(const float* x, int64_t k, int64_t k_pad, int64_t groups, bool offset128, int8_t* q,
                         float* scale, int32_t* group_sums);
void gemm_int8_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                      ThreadPool& pool);
void gemm_w4a8_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                      ThreadPool& pool);
void gemm_w4a16_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool);
// kW4A16 on AVX512-BF16 + VBMI: nibbles turned into bf16 in registers, vdpbf16ps for decode and prefill
// tiles.
void gemm_w4a16_bf16_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                            ThreadPool& pool);
// kW4A16 on AMX-BF16 for m > kDecodeMaxM: the same exact bf16 weights (1 + q/16) in B tiles, tdpbf16ps
// per group of 128; at m <= kDecodeMaxM the AVX512-BF16 GEMV.
void gemm_w4a16_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                    ThreadPool& pool);

// kBF16 with bf16_activations on AVX512-BF16 (vdpbf16ps).
void gemm_bf16dot_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                         ThreadPool& pool);

// AMX tile kernels; for m <= kDecodeMaxM they run the AVX-512 GEMV. The dispatcher sends W4A8 to AMX only
// from 64 activation rows (see dispatch.cpp).
void gemm_int8_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool);
void gemm_w4a8_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool);
// kBF16 with bf16_activations (tdpbf16ps).
void gemm_bf16_amx(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                   ThreadPool& pool);

}  // namespace spark::kernels
