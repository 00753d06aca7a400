// Scalar reference of gemm(): plain loops over the packed layouts, read through layout.h. The integer
// formats define the arithmetic every fast kernel reproduces exactly:
//   kInt8  acc = Σ_k xq[k] · wq[n, k] (s32);       y = (f32(acc) · wscale[n]) · xscale
//   kW4A8  acc_g = Σ_{k in g} xq[k] · (q[n, k] - 8); t = fma(f32(acc_g), scale[n, g], t) for g = 0, 1, ...;
//          y = t · xscale
// The float formats (and kW4A16, whose fast kernels reassociate freely) accumulate in double; kW4A16
// multiplies the activations rounded to bf16 (round to nearest even), as every tier's kernels do.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gemm/gemm_isa.h"
#include "gemm/layout.h"
#include "util/half.h"

namespace spark::kernels {

void gemm_ref_rows(const float* x, int64_t m, const QuantizedWeight& w, const QuantizedActivations* a,
                   float* y, int64_t ldy, int64_t n_begin, int64_t n_end) {
  const int64_t k = w.k, groups = w.groups();
  const auto* q = static_cast<const uint8_t*>(w.qweight);
  std::vector<int32_t> qrow(static_cast<size_t>(k));
  std::vector<float> frow(static_cast<size_t>(k));
  for (int64_t n = n_begin; n < n_end; ++n) {
    switch (w.format) {
      case WeightFormat::kInt8: {
        for (int64_t kk = 0; kk < k; ++kk)
          qrow[kk] = static_cast<int8_t>(q[layout::int8_offset(w.k_pad, n, kk)]);
        const float ws = static_cast<const float*>(w.scales)[n];
        for (int64_t i = 0; i < m; ++i) {
          int32_t acc = 0;
          for (int64_t kk = 0; kk < k; ++kk) acc += a->q[i * a->k_pad + kk] * qrow[kk];
          y[i * ldy + n] = (static_cast<float>(acc) * ws) * a->scale[i];
        }
        break;
      }
      case WeightFormat::kW4A8: {
        for (int64_t kk = 0; kk < k; ++kk) {
          bool high = false;
          const size_t off = layout::w4a8_offset(w.k_pad, n, kk, &high);
          qrow[kk] = layout::nibble(q, off, high) - 8;
        }
        const auto* scales = static_cast<const uint16_t*>(w.scales);
        for (int64_t i = 0; i < m; ++i) {
          float t = 0.0f;
          for (int64_t g = 0; g < groups; ++g) {
            int32_t acc = 0;
            for (int64_t kk = g * kGroupSize; kk < std::min(k, (g + 1) * kGroupSize); ++kk) {
              acc += a->q[i * a->k_pad + kk] * qrow[kk];
            }
            t = std::fma(static_cast<float>(acc), f16_to_f32(scales[layout::w4a8_scale_index(groups, n, g)]),
                         t);
          }
          y[i * ldy + n] = t * a->scale[i];
        }
        break;
      }
      default: {
        dequantize_row(w, n, frow.data());
        const bool round_x =
            w.format == WeightFormat::kW4A16 || (w.format == WeightFormat::kBF16 && w.bf16_activations);
        for (int64_t i = 0; i < m; ++i) {
          double acc = 0.0;
          for (int64_t kk = 0; kk < k; ++kk) {
            const float xv = round_x ? bf16_to_f32(f32_to_bf16(x[i * k + kk])) : x[i * k + kk];
            acc += static_cast<double>(xv) * frow[kk];
          }
          y[i * ldy + n] = static_cast<float>(acc);
        }
        break;
      }
    }
  }
}

namespace {

bool is_integer_format(WeightFormat f) {
  return f == WeightFormat::kInt8 || f == WeightFormat::kW4A8;
}

}  // namespace

void gemm_ref(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy) {
  if (m <= 0 || w.n <= 0) return;
  QuantizedActivations a;
  if (is_integer_format(w.format)) {
    a = quantize_activations(x, m, w.k, w.k_pad, w.format == WeightFormat::kW4A8 ? w.groups() : 0, false,
                             nullptr);
  }
  gemm_ref_rows(x, m, w, &a, y, ldy, 0, w.n);
}

void gemm_scalar(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                 ThreadPool& pool) {
  QuantizedActivations a;
  if (is_integer_format(w.format)) {
    a = quantize_activations(x, m, w.k, w.k_pad, w.format == WeightFormat::kW4A8 ? w.groups() : 0, false,
                             &pool);
  }
  pool.parallel_for(static_cast<size_t>(w.n), 16, [&](size_t begin, size_t end) {
    gemm_ref_rows(x, m, w, &a, y, ldy, static_cast<int64_t>(begin), static_cast<int64_t>(end));
  });
}

}  // namespace spark::kernels
