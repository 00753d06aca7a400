#include <algorithm>
#include <cmath>
#include <limits>

#include "softmax/softmax.h"

namespace spark::kernels {

size_t argmax_ref(const float* x, size_t n) {
  size_t best = 0;
  float value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > value) {
      value = x[i];
      best = i;
    }
  }
  return best;
}

float scaled_max_ref(const float* x, size_t n, float scale) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  float m = kNone;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > kNone) m = std::max(m, x[i] * scale);
  }
  return m;
}

double exp_weights_ref(const float* x, size_t n, float scale, float shift, double floor, double* w) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double e = 0.0;
    if (x[i] > -std::numeric_limits<float>::infinity()) {
      const float l = x[i] * scale;
      const float d = l - shift;
      if (d >= kLeastExpArgument) e = std::exp(static_cast<double>(d));
    }
    w[i] = e;
    if (e >= floor) sum += e;
  }
  return sum;
}

size_t pick_weight_from(const double* w, size_t n, double floor, double r, size_t from) {
  for (size_t i = from; i < n; ++i) {
    if (w[i] >= floor) {
      r -= w[i];
      if (r < 0.0) return i;
    }
  }
  for (size_t i = n; i-- > 0;) {
    if (w[i] >= floor) return i;
  }
  return n;
}

double exp_sum_ref(const float* x, size_t n, float shift) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float d = x[i] - shift;
    if (x[i] > -std::numeric_limits<float>::infinity() && d >= kLeastExpfArgument) {
      sum += static_cast<double>(std::exp(d));
    }
  }
  return sum;
}

void weight_bucket_masses_ref(const double* w, size_t n, double floor, double* masses) {
  for (size_t i = 0; i < n; ++i) {
    if (w[i] >= floor) masses[weight_bucket(w[i])] += w[i];
  }
}

size_t ids_in_range_ref(const double* w, size_t n, double lo, double hi, int32_t* ids) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] >= lo && w[i] < hi) ids[count++] = static_cast<int32_t>(i);
  }
  return count;
}

size_t pick_weight_ref(const double* w, size_t n, double floor, double r) {
  return pick_weight_from(w, n, floor, r, 0);
}

}  // namespace spark::kernels
