#include "gemm/path_report.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "gemm/dispatch.h"

namespace spark::kernels {

namespace {

const WeightFormat kFormats[] = {WeightFormat::kF32,  WeightFormat::kBF16, WeightFormat::kF16,
                                 WeightFormat::kInt8, WeightFormat::kW4A8, WeightFormat::kW4A16};

std::string yes_no(bool v) {
  return v ? "yes" : "no";
}

}  // namespace

HardwareReport hardware_report() {
  HardwareReport r;
  r.features = cpu_features();
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (cpu_supports(isa)) r.best = isa;
  }
  r.active = active_isa();
  r.avx512_bf16 = r.active >= Isa::kAvx512 && r.features.avx512_bf16;
  struct Class {
    const char* name;
    int64_t m, n, k;
  };
  // Spark-X2.5-1.7B shapes: a decode step, a 512-token prefill chunk, the tied 131072-row output head.
  const Class classes[] = {
      {"decode", 1, 2048, 2048}, {"prefill", 512, 13312, 2048}, {"output head", 1, 131072, 2048}};
  for (const Class& c : classes) {
    for (WeightFormat f : kFormats) {
      for (bool bf16_act : {false, true}) {
        if (bf16_act && f != WeightFormat::kBF16) continue;
        const GemmChoice choice = describe_gemm(f, c.m, r.active, bf16_act);
        std::string reason = choice.reason;
        if (std::string(c.name) == "output head") {
          reason += "; the 131072 rows are split over the threads in tasks handed out one at a time";
        }
        r.paths.push_back({c.name, c.m, c.n, c.k, f, bf16_act, choice.kernel, reason});
      }
    }
  }
  const bool fast_int8 = r.active >= Isa::kAvx2;
  if (fast_int8) {
    r.advice.push_back(
        {"single-stream decode", WeightFormat::kW4A8,
         "fewest bytes per weight (4.125 bits) with integer dot products (" +
             std::string(r.active >= Isa::kAvx512 || r.features.avx_vnni ? "vpdpbusd" : "vpmaddubsw") + ")"});
  } else {
    r.advice.push_back(
        {"single-stream decode", WeightFormat::kW4A16, "no fast int8 dot product on this CPU"});
  }
  r.advice.push_back(
      {"fidelity", WeightFormat::kW4A16,
       "4-bit weights but f32 activations: no per-token activation rounding (bf16 weights for the "
       "closest match to the reference)"});
  r.advice.push_back({"many concurrent sequences", WeightFormat::kInt8,
                      "batched GEMMs are compute-bound: int8 tiles do the most multiply-adds per cycle"});
  return r;
}

std::string format_hardware_report(const HardwareReport& r) {
  const CpuFeatures& f = r.features;
  std::ostringstream s;
  s << "cpu: " << (f.brand.empty() ? "unknown" : f.brand) << "\n";
  s << "avx2: " << yes_no(f.avx2) << ", fma: " << yes_no(f.fma) << ", f16c: " << yes_no(f.f16c)
    << ", avx-vnni: " << yes_no(f.avx_vnni) << "\n";
  s << "avx512 f/bw/vl/dq: " << yes_no(f.avx512f) << "/" << yes_no(f.avx512bw) << "/" << yes_no(f.avx512vl)
    << "/" << yes_no(f.avx512dq) << ", vnni: " << yes_no(f.avx512_vnni) << ", bf16: " << yes_no(f.avx512_bf16)
    << " (counted only when the OS saves zmm state)\n";
  s << "amx tile/int8/bf16: " << yes_no(f.amx_tile) << "/" << yes_no(f.amx_int8) << "/" << yes_no(f.amx_bf16)
    << " (counted only with OS support and the arch_prctl tile permission)\n";
  s << "best tier: " << isa_name(r.best) << ", active tier: " << isa_name(r.active)
    << (r.active != r.best ? " (SPARK_FORCE_ISA)" : "") << "\n";
  if (const char* off = std::getenv("SPARK_DISABLE_CPU_FEATURES"); off != nullptr && *off != '\0') {
    s << "turned off: " << off << " (SPARK_DISABLE_CPU_FEATURES)\n";
  }
  s << "gemm paths (m = activation rows):\n";
  for (const GemmPathEntry& p : r.paths) {
    char bits[32];
    std::snprintf(bits, sizeof bits, "%.2f", bits_per_weight(p.format, p.n, p.k));
    s << "  " << p.gemm_class << " [m=" << p.m << ", " << p.n << "x" << p.k << "] "
      << weight_format_name(p.format) << (p.bf16_activations ? " with bf16 activations" : "") << " (" << bits
      << " bits/weight): " << p.kernel << " -- " << p.reason << "\n";
  }
  s << "suggested formats:\n";
  for (const FormatAdvice& a : r.advice) {
    s << "  " << a.use << ": " << weight_format_name(a.format) << " -- " << a.reason << "\n";
  }
  return s.str();
}

}  // namespace spark::kernels
