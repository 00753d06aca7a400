#include "model/rope.h"

#include <cmath>

namespace spark {

RopeTable::RopeTable(const RopeParams& params, int64_t max_positions)
    : rotary_dim_(params.rotary_dim), max_positions_(max_positions) {
  const int half = rotary_dim_ / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  // The exponent is over the rotary dims, not head_dim: a partial rotary layer has its own spectrum.
  for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(params.theta, -2.0 * i / rotary_dim_);
  cos_.resize(static_cast<size_t>(max_positions * half));
  sin_.resize(cos_.size());
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half; ++i) {
      // Angles in double: at large positions f32 products lose the low bits of the phase.
      double angle = static_cast<double>(p) * inv_freq[i];
      cos_[p * half + i] = static_cast<float>(std::cos(angle));
      sin_[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void RopeTable::apply(float* x, int n_heads, int head_dim, int64_t pos) const {
  const int half = rotary_dim_ / 2;
  const float* c = cos_.data() + pos * half;
  const float* s = sin_.data() + pos * half;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      float a = xh[i], b = xh[i + half];
      xh[i] = a * c[i] - b * s[i];
      xh[i + half] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace spark
