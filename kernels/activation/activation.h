// The FFN activation as a kernel family: GEGLU with the exact erf GELU (the spec's, not the tanh
// approximation), out[i] = gate[i] / 2 * (1 + erf(gate[i] / sqrt(2))) * up[i]. A scalar reference and
// per-ISA bodies behind one dispatch; the caller splits long rows over its threads.
//
// The vector bodies take erf from glibc's vector math library (libmvec, part of libc6): a scalar erff per
// element was 5-7% of a decode step (186k calls per token on the 1.7B shape). libmvec's erff is within
// 4 ulp of the true erf (glibc's scalar erff within 1); tests/unit/kernels/activation_test.cpp holds every
// body to 3e-7 |gate * up| of the double-precision activation.
#pragma once

#include <cstddef>

namespace spark::kernels {

// out may be gate (in place); up must not overlap out otherwise.
void geglu(const float* gate, const float* up, float* out, size_t n);

void geglu_ref(const float* gate, const float* up, float* out, size_t n);

}  // namespace spark::kernels
