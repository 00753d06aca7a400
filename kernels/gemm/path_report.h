// The hardware report: what the probe found, which tier the kernels run at, and which kernel each class
// of GEMM takes per weight format, with the reason (quoted from the dispatcher itself, so the report
// cannot drift from what runs). Shown by `spark-server hw` and logged at start-up.
#pragma once

#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "gemm/weight.h"

namespace spark::kernels {

struct GemmPathEntry {
  std::string gemm_class;  // "decode", "prefill", "output head"
  int64_t m = 0;           // activation rows the class is described at
  int64_t n = 0, k = 0;    // representative Spark-1.7B shape
  WeightFormat format = WeightFormat::kF32;
  bool bf16_activations = false;  // kBF16 with QuantizedWeight::bf16_activations set
  std::string kernel;
  std::string reason;
};

struct FormatAdvice {
  std::string use;  // "single-stream decode", "fidelity", "many concurrent sequences"
  WeightFormat format = WeightFormat::kW4A8;
  std::string reason;
};

struct HardwareReport {
  CpuFeatures features;
  Isa best = Isa::kScalar;    // best tier the CPU supports
  Isa active = Isa::kScalar;  // tier in use (SPARK_FORCE_ISA may lower it)
  bool avx512_bf16 = false;   // vdpbf16ps available for bf16 weights with bf16_activations
  std::vector<GemmPathEntry> paths;
  std::vector<FormatAdvice> advice;
};

HardwareReport hardware_report();

// Human-readable, one fact per line.
std::string format_hardware_report(const HardwareReport& report);

}  // namespace spark::kernels
