// Per-instruction-set bodies of the activation family, each compiled with its own target flags;
// dispatch.cpp calls them once the probe says the CPU has the ISA (tests call them directly).
#pragma once

#include <cstddef>

namespace spark::kernels {

void geglu_avx2(const float* gate, const float* up, float* out, size_t n);
void geglu_avx512(const float* gate, const float* up, float* out, size_t n);

}  // namespace spark::kernels
