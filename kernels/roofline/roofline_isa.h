// Per-ISA inner loops of the roofline measurements (roofline_avx2.cpp, roofline_avx512.cpp,
// roofline_avx512_bf16.cpp, roofline_amx.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spark::kernels {

// How far ahead of each of its four streams the read loop prefetches.
constexpr size_t kReadAhead = 1024;

// Reads [p, p + bytes) (bytes a multiple of 256) as four streams and returns a value that depends on every
// byte.
uint64_t read_stream_avx2(const uint8_t* p, size_t bytes);
uint64_t read_stream_avx512(const uint8_t* p, size_t bytes);

// Runs `iters` iterations of independent FMA chains; returns the flops done (and a sink value).
double fma_loop_avx2(int64_t iters, float* sink);
double fma_loop_avx512(int64_t iters, float* sink);

// Same for int8 multiply-adds (2 ops each).
double int8_loop_avx2(int64_t iters, int32_t* sink);
double int8_loop_avx512(int64_t iters, int32_t* sink);
// AVX-VNNI's vpdpbusd on ymm: what the AVX2 integer tiles multiply with on CPUs that have it.
double int8_loop_avxvnni(int64_t iters, int32_t* sink);

// vdpbf16ps chains: 2 products (4 flops) per f32 lane per instruction.
double bf16_dot_loop_avx512(int64_t iters, float* sink);

// AMX tile products (tdpbssd, tdpbf16ps) into four accumulator tiles; the caller holds the tile permission.
double amx_int8_loop(int64_t iters, int32_t* sink);
double amx_bf16_loop(int64_t iters, float* sink);
// The same four tdpbssd per round, each round first loading its two A and two B tiles from the next 4 KiB
// of `tiles` (n_tiles 1 KiB tiles, a multiple of 4, cycled): the tile unit's rate when its operands come
// from wherever a buffer of that size lives (L1, L2, last-level cache, memory).
double amx_int8_fed_loop(int64_t iters, const int8_t* tiles, size_t n_tiles, int32_t* sink);

}  // namespace spark::kernels
