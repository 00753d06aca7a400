// Runtime hardware probe. Instruction sets count only when both the CPU reports them (cpuid) and the OS
// saves their registers (xgetbv; for AMX also the per-process tile permission from arch_prctl).
#pragma once

#include <string>
#include <vector>

namespace spark::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;
  bool avx_vnni = false;
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  std::string brand;
};

// Every probed feature under the name `spark-server hw --json` prints and SPARK_DISABLE_CPU_FEATURES takes.
struct CpuFeatureField {
  const char* name;
  bool CpuFeatures::*member;
};
const std::vector<CpuFeatureField>& cpu_feature_fields();

// Probed once; later calls return the same object. SPARK_DISABLE_CPU_FEATURES (a comma list of the names
// `spark-server hw --json` prints) turns features off, to run what a CPU without them runs; an unknown name
// throws spark::Error.
const CpuFeatures& cpu_features();
// Turns off the features a comma list names (SPARK_DISABLE_CPU_FEATURES); throws spark::Error on an
// unknown name.
void disable_cpu_features(CpuFeatures& f, const std::string& list);

// Instruction-set tiers the kernels are compiled for, lowest first. Each includes the ones below it:
//   kAvx2    AVX2 + FMA + F16C (Haswell, Zen 1 and later)
//   kAvx512  + AVX-512 F/BW/VL/DQ + VNNI (Cascade Lake, Ice Lake, Zen 4 and later; Skylake-X has no VNNI
//            and runs the AVX2 tier)
//   kAmx     + AMX tile/int8/bf16 with the OS permission granted (Sapphire Rapids and later)
// AVX512-BF16 is not a tier: kernels that want vdpbf16ps check cpu_features().avx512_bf16 (and the W4A16
// bf16 kernels, which also use vpermb, cpu_features().avx512_vbmi).
// Nor is AVX-VNNI: the AVX2 tier's integer tiles check cpu_features().avx_vnni for its ymm vpdpbusd.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

const char* isa_name(Isa isa);
bool cpu_supports(Isa isa);
// What a tier needs, for messages: "AVX2+FMA+F16C", "AVX-512 F/BW/VL/DQ/VNNI", "AMX-TILE/INT8/BF16".
const char* isa_requirements(Isa isa);

// The tier kernels run at: the best the CPU supports, or SPARK_FORCE_ISA (scalar|avx2|avx512|amx) when
// set. Forcing a tier the CPU lacks throws spark::Error: silently running something else would make a
// benchmark lie.
Isa active_isa();

}  // namespace spark::kernels
