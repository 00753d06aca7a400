#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "gemm/path_report.h"

namespace spark::kernels {

TEST(HardwareReport, CoversEveryClassAndFormatAtTheActiveTier) {
  const HardwareReport r = hardware_report();
  EXPECT_EQ(r.active, active_isa());
  EXPECT_TRUE(cpu_supports(r.best));
  EXPECT_GE(r.best, r.active);
  std::set<std::tuple<std::string, WeightFormat, bool>> seen;
  for (const GemmPathEntry& p : r.paths) {
    EXPECT_FALSE(p.kernel.empty());
    EXPECT_FALSE(p.reason.empty());
    seen.insert({p.gemm_class, p.format, p.bf16_activations});
  }
  EXPECT_EQ(seen.size(),
            3u * 7u);  // decode, prefill, output head x six formats and bf16 with bf16 activations
  const std::string text = format_hardware_report(r);
  for (const char* word :
       {"decode", "prefill", "output head", "w4a8", "w4a16", "int8", "bf16", "active tier"}) {
    EXPECT_NE(text.find(word), std::string::npos) << word;
  }
  EXPECT_NE(text.find(std::string("active tier: ") + isa_name(active_isa())), std::string::npos);
  EXPECT_FALSE(r.advice.empty());
}

// The tiers are ordered: a CPU that supports one supports every lower one.
TEST(HardwareReport, TiersAreNested) {
  bool higher = false;
  for (Isa isa : {Isa::kAmx, Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
    if (higher) {
      EXPECT_TRUE(cpu_supports(isa)) << isa_name(isa);
    }
    higher = higher || cpu_supports(isa);
  }
  EXPECT_TRUE(cpu_supports(Isa::kScalar));
}

}  // namespace spark::kernels
