// The one place that decides which kernel a GEMM runs: from the weight format, the number of activation
// rows and the instruction-set tier. gemm() uses it at the active tier, the hardware report quotes its
// reasons, and the tests run every tier the CPU supports against the reference.
#pragma once

#include <string>

#include "cpu/cpu_features.h"
#include "gemm/gemm_isa.h"

namespace spark::kernels {

// The kernel gemm() runs for a weight of `format` with m activation rows at tier `isa` (which the CPU
// must support). Cheap: called on every GEMM.
GemmFn select_gemm(WeightFormat format, int64_t m, Isa isa, bool bf16_activations);

// The instructions that do a kernel's multiply-adds: which measured peak (kernels/roofline) bounds it once
// the weights come from cache.
enum class Arithmetic { kF32Fma, kInt8Dot, kBf16Dot, kAmxInt8, kAmxBf16 };
const char* arithmetic_name(Arithmetic a);  // "f32 FMA", "int8 dot", "bf16 dot", "AMX int8", "AMX bf16"

struct GemmChoice {
  std::string kernel;  // short name, e.g. "w4a8 avx512-vnni tiles"
  std::string reason;  // why this kernel for this shape on this machine
  Arithmetic arithmetic = Arithmetic::kF32Fma;
};
// What select_gemm picks, in words.
GemmChoice describe_gemm(WeightFormat format, int64_t m, Isa isa, bool bf16_activations);

// gemm() at tier `isa` instead of the active one.
void gemm_at(Isa isa, const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
             ThreadPool& pool);

}  // namespace spark::kernels
