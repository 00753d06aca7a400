// Y = X · Wᵀ with f32 activations and weights kept in the checkpoint's float dtype (f32, bf16, f16),
// widened to f32 as they are loaded. W is row-major [N, K], the layout of a torch Linear weight, so a
// memory-mapped checkpoint tensor is used in place.
#pragma once

#include <cstdint>

#include "util/thread_pool.h"

namespace spark::kernels {

enum class FloatDType { kF32, kBF16, kF16 };

const char* float_dtype_name(FloatDType dtype);
int float_dtype_size(FloatDType dtype);

struct FloatWeight {
  FloatDType dtype = FloatDType::kF32;
  const void* data = nullptr;
  int64_t n = 0;  // output features (rows)
  int64_t k = 0;  // input features (columns)
};

// y[m, n] = sum_k x[m, k] * w[n, k] for m < M. x is [M, K] with row stride K; y is [M, N] with row
// stride ldy (>= N). Runs on the pool at the active instruction-set tier.
void gemm_float(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy, ThreadPool& pool);

// Scalar reference (double accumulation, single thread): the ground truth the fast paths are tested on.
void gemm_float_ref(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy);

// Widens `count` weights starting at element `offset` of w (row-major) to f32.
void float_weight_to_f32(const FloatWeight& w, int64_t offset, int64_t count, float* out);

}  // namespace spark::kernels
