#include <vector>

#include "gemm_float/gemm_float.h"
#include "util/half.h"

namespace spark::kernels {

const char* float_dtype_name(FloatDType dtype) {
  switch (dtype) {
    case FloatDType::kF32:
      return "f32";
    case FloatDType::kBF16:
      return "bf16";
    case FloatDType::kF16:
      return "f16";
  }
  return "?";
}

int float_dtype_size(FloatDType dtype) {
  return dtype == FloatDType::kF32 ? 4 : 2;
}

void float_weight_to_f32(const FloatWeight& w, int64_t offset, int64_t count, float* out) {
  switch (w.dtype) {
    case FloatDType::kF32: {
      const float* src = static_cast<const float*>(w.data) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = src[i];
      break;
    }
    case FloatDType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(src[i]);
      break;
    }
    case FloatDType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + offset;
      for (int64_t i = 0; i < count; ++i) out[i] = f16_to_f32(src[i]);
      break;
    }
  }
}

void gemm_float_ref(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy) {
  std::vector<float> row(static_cast<size_t>(w.k));
  for (int64_t n = 0; n < w.n; ++n) {
    float_weight_to_f32(w, n * w.k, w.k, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0.0;
      const float* xi = x + i * w.k;
      for (int64_t k = 0; k < w.k; ++k) acc += static_cast<double>(xi[k]) * row[k];
      y[i * ldy + n] = static_cast<float>(acc);
    }
  }
}

}  // namespace spark::kernels
