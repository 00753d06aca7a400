#include "activation/activation.h"
#include "activation/activation_isa.h"
#include "cpu/cpu_features.h"

namespace spark::kernels {

void geglu(const float* gate, const float* up, float* out, size_t n) {
  if (active_isa() >= Isa::kAvx512) {
    geglu_avx512(gate, up, out, n);
  } else if (active_isa() >= Isa::kAvx2) {
    geglu_avx2(gate, up, out, n);
  } else {
    geglu_ref(gate, up, out, n);
  }
}

}  // namespace spark::kernels
