#include "cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "spark/error.h"

namespace spark::kernels {

namespace {

uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux keeps AMX tile data off until a process asks for it (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

CpuFeatures probe() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid(1, a, b, c, d);
  const bool osxsave = (c >> 27) & 1;
  const bool cpu_fma = (c >> 12) & 1;
  const bool cpu_f16c = (c >> 29) & 1;
  const bool cpu_avx = (c >> 28) & 1;
  uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;

  __cpuid_count(7, 0, a, b, c, d);
  const uint32_t b7 = b, c7 = c, d7 = d;
  __cpuid_count(7, 1, a, b, c, d);
  const uint32_t a71 = a;

  if (cpu_avx && os_ymm) {
    f.avx2 = (b7 >> 5) & 1;
    f.fma = cpu_fma;
    f.f16c = cpu_f16c;
    f.avx_vnni = (a71 >> 4) & 1;
  }
  if (os_zmm) {
    f.avx512f = (b7 >> 16) & 1;
    f.avx512dq = (b7 >> 17) & 1;
    f.avx512bw = (b7 >> 30) & 1;
    f.avx512vl = (b7 >> 31) & 1;
    f.avx512_vnni = (c7 >> 11) & 1;
    f.avx512_bf16 = (a71 >> 5) & 1;
    f.avx512_vbmi = (c7 >> 1) & 1;
  }
  if (os_amx && ((d7 >> 24) & 1) && request_amx_permission()) {
    f.amx_tile = true;
    f.amx_bf16 = (d7 >> 22) & 1;
    f.amx_int8 = (d7 >> 25) & 1;
  }

  char brand[49] = {};
  // GCC declares __get_cpuid_max unsigned, clang int: compare as the unsigned leaf number it is.
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr)) >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i) {
      __cpuid(0x80000002 + i, a, b, c, d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
  }
  f.brand = brand;
  while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
  return f;
}

Isa parse_isa(const std::string& name) {
  if (name == "scalar") return Isa::kScalar;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  if (name == "amx") return Isa::kAmx;
  throw Error("SPARK_FORCE_ISA=" + name + ": unknown instruction set (use scalar, avx2, avx512 or amx)");
}

Isa best_isa() {
  for (Isa isa : {Isa::kAmx, Isa::kAvx512, Isa::kAvx2}) {
    if (cpu_supports(isa)) return isa;
  }
  return Isa::kScalar;
}

}  // namespace

const std::vector<CpuFeatureField>& cpu_feature_fields() {
  static const std::vector<CpuFeatureField> fields = {{"avx2", &CpuFeatures::avx2},
                                                      {"fma", &CpuFeatures::fma},
                                                      {"f16c", &CpuFeatures::f16c},
                                                      {"avx_vnni", &CpuFeatures::avx_vnni},
                                                      {"avx512f", &CpuFeatures::avx512f},
                                                      {"avx512bw", &CpuFeatures::avx512bw},
                                                      {"avx512vl", &CpuFeatures::avx512vl},
                                                      {"avx512dq", &CpuFeatures::avx512dq},
                                                      {"avx512_vnni", &CpuFeatures::avx512_vnni},
                                                      {"avx512_bf16", &CpuFeatures::avx512_bf16},
                                                      {"avx512_vbmi", &CpuFeatures::avx512_vbmi},
                                                      {"amx_tile", &CpuFeatures::amx_tile},
                                                      {"amx_int8", &CpuFeatures::amx_int8},
                                                      {"amx_bf16", &CpuFeatures::amx_bf16}};
  return fields;
}

// SPARK_DISABLE_CPU_FEATURES=avx_vnni,avx512_bf16 (names as `spark-server hw --json` prints them) turns
// probed features off, so the kernels a CPU without them runs can be run and measured here: the features that
// are not tiers (AVX-VNNI, AVX512-BF16, VBMI) are otherwise out of SPARK_FORCE_ISA's reach.
void disable_cpu_features(CpuFeatures& f, const std::string& list) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    bool known = false;
    for (const CpuFeatureField& field : cpu_feature_fields()) {
      if (name == field.name) {
        f.*field.member = false;
        known = true;
      }
    }
    if (!known) {
      throw Error("SPARK_DISABLE_CPU_FEATURES: unknown feature '" + name +
                  "' (use the names `spark-server hw --json` prints, e.g. avx_vnni, avx512_bf16)");
    }
  }
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f = probe();
    const char* off = std::getenv("SPARK_DISABLE_CPU_FEATURES");
    if (off != nullptr) disable_cpu_features(f, off);
    return f;
  }();
  return features;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

const char* isa_requirements(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "nothing";
    case Isa::kAvx2:
      return "AVX2+FMA+F16C";
    case Isa::kAvx512:
      return "AVX-512 F/BW/VL/DQ/VNNI";
    case Isa::kAmx:
      return "AMX-TILE/INT8/BF16";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni;
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx512:
      return avx512;
    case Isa::kAmx:
      return avx512 && f.amx_tile && f.amx_int8 && f.amx_bf16;
  }
  return false;
}

Isa active_isa() {
  static const Isa isa = [] {
    const char* forced = std::getenv("SPARK_FORCE_ISA");
    if (forced == nullptr || *forced == '\0') return best_isa();
    Isa want = parse_isa(forced);
    if (!cpu_supports(want)) {
      throw Error(std::string("SPARK_FORCE_ISA=") + forced +
                  ": this CPU does not support it (best here: " + isa_name(best_isa()) + ")");
    }
    return want;
  }();
  return isa;
}

}  // namespace spark::kernels
