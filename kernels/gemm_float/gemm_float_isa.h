// Per-instruction-set bodies of gemm_float, each compiled in its own translation unit with its own
// target flags; only dispatch.cpp calls them, and only after the probe says the CPU has the ISA.
#pragma once

#include "gemm_float/gemm_float.h"

namespace spark::kernels {

void gemm_float_avx2(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                     ThreadPool& pool);
void gemm_float_avx512(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool);

}  // namespace spark::kernels
