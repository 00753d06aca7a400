#include <cmath>

#include "activation/activation.h"

namespace spark::kernels {

void geglu_ref(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::erf(g * 0.70710678118654752f)) * up[i];
  }
}

}  // namespace spark::kernels
