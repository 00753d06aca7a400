#include "cpu/cpu_features.h"
#include "softmax/softmax.h"
#include "softmax/softmax_isa.h"

namespace spark::kernels {

size_t argmax(const float* x, size_t n) {
  if (active_isa() >= Isa::kAvx512) return argmax_avx512(x, n);
  if (active_isa() >= Isa::kAvx2) return argmax_avx2(x, n);
  return argmax_ref(x, n);
}

float scaled_max(const float* x, size_t n, float scale) {
  if (active_isa() >= Isa::kAvx512) return scaled_max_avx512(x, n, scale);
  if (active_isa() >= Isa::kAvx2) return scaled_max_avx2(x, n, scale);
  return scaled_max_ref(x, n, scale);
}

double exp_weights(const float* x, size_t n, float scale, float shift, double floor, double* w) {
  if (active_isa() >= Isa::kAvx512) return exp_weights_avx512(x, n, scale, shift, floor, w);
  if (active_isa() >= Isa::kAvx2) return exp_weights_avx2(x, n, scale, shift, floor, w);
  return exp_weights_ref(x, n, scale, shift, floor, w);
}

size_t pick_weight(const double* w, size_t n, double floor, double r) {
  if (active_isa() >= Isa::kAvx512) return pick_weight_avx512(w, n, floor, r);
  if (active_isa() >= Isa::kAvx2) return pick_weight_avx2(w, n, floor, r);
  return pick_weight_ref(w, n, floor, r);
}

double exp_sum(const float* x, size_t n, float shift) {
  if (active_isa() >= Isa::kAvx512) return exp_sum_avx512(x, n, shift);
  if (active_isa() >= Isa::kAvx2) return exp_sum_avx2(x, n, shift);
  return exp_sum_ref(x, n, shift);
}

void weight_bucket_masses(const double* w, size_t n, double floor, double* masses) {
  if (active_isa() >= Isa::kAvx512) return weight_bucket_masses_avx512(w, n, floor, masses);
  if (active_isa() >= Isa::kAvx2) return weight_bucket_masses_avx2(w, n, floor, masses);
  weight_bucket_masses_ref(w, n, floor, masses);
}

size_t ids_in_range(const double* w, size_t n, double lo, double hi, int32_t* ids) {
  if (active_isa() >= Isa::kAvx512) return ids_in_range_avx512(w, n, lo, hi, ids);
  if (active_isa() >= Isa::kAvx2) return ids_in_range_avx2(w, n, lo, hi, ids);
  return ids_in_range_ref(w, n, lo, hi, ids);
}

}  // namespace spark::kernels
