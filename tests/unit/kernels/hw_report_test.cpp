#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cpu/decode_rows.h"
#include "gemm/dispatch.h"
#include "gemm/gemm_isa.h"
#include "gemm/path_report.h"
#include "gemm_float/gemm_float_isa.h"
#include "kernel_test_util.h"
#include "roofline/roofline.h"
#include "roofline/roofline_isa.h"
#include "spark/error.h"

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
// A small batch's path in the report follows the bounds the bodies branch on: the row dots (or W4A16's f32
// register tiles) up to the bound, the panels one row past it.
TEST(HardwareReport, SmallBatchesNameTheirPath) {
  auto kernel = [](WeightFormat f, int64_t m, Isa isa) { return describe_gemm(f, m, isa, false).kernel; };
  const auto npos = std::string::npos;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!cpu_supports(isa)) continue;
    const bool avx512 = isa == Isa::kAvx512;
    for (auto [format, dtype] : {std::pair{WeightFormat::kBF16, FloatDType::kBF16},
                                 std::pair{WeightFormat::kF32, FloatDType::kF32}}) {
      const int64_t bound = float_row_dots_max_m(dtype, avx512);
      // Up to one chunk of rows the row dots run as at decode (one pass over each task's rows).
      const int64_t chunk_rows = avx512 ? 4 : kFloatAvx2ChunkRows;
      EXPECT_TRUE(kernel(format, chunk_rows, isa).ends_with(" row dots")) << isa_name(isa);
      EXPECT_NE(kernel(format, chunk_rows + 1, isa).find("row dots in chunks"), npos) << isa_name(isa);
      EXPECT_NE(kernel(format, bound, isa).find("row dots in chunks"), npos) << isa_name(isa);
      EXPECT_NE(kernel(format, bound + 1, isa).find("widened panels"), npos) << isa_name(isa);
      const std::string chunk = "chunks of at most " + std::to_string(chunk_rows) + " rows";
      EXPECT_NE(describe_gemm(format, chunk_rows + 1, isa, false).reason.find(chunk), npos) << isa_name(isa);
      // Only the AVX-512 bf16 rows ask for the next run of weight rows, up to row_dot_chunks' bound.
      const auto next = [&, f = format](int64_t m) {
        return describe_gemm(f, m, isa, false).reason.find("the next 16") != npos;
      };
      EXPECT_FALSE(next(chunk_rows)) << isa_name(isa);
      EXPECT_EQ(next(chunk_rows + 1), avx512 && format == WeightFormat::kBF16) << isa_name(isa);
      EXPECT_EQ(next(kRowChunksPrefetchMaxM), avx512 && format == WeightFormat::kBF16) << isa_name(isa);
      EXPECT_FALSE(next(kRowChunksPrefetchMaxM + 1)) << isa_name(isa);
    }
  }
  const auto bf16_dots = [](int64_t m) { return describe_gemm(WeightFormat::kBF16, m, Isa::kAvx512, true); };
  if (bf16_dots(kBf16DotChunkRows + 1).kernel == "bf16 avx512-bf16 row dots in chunks") {
    EXPECT_EQ(bf16_dots(kBf16DotChunkRows).kernel, "bf16 avx512-bf16 row dots");
    EXPECT_EQ(bf16_dots(kBf16DotChunkRows).reason.find("the next 16"), npos);
    EXPECT_NE(bf16_dots(kBf16DotChunkRows + 1).reason.find("the next 16"), npos);
    EXPECT_EQ(bf16_dots(kRowChunksPrefetchMaxM + 1).reason.find("the next 16"), npos);
  }
  if (cpu_supports(Isa::kAvx2)) {
    const int64_t bound = w4a16_f32_tiles_max_m(false);
    EXPECT_EQ(kernel(WeightFormat::kW4A16, bound, Isa::kAvx2), "w4a16 avx2 tiles");
    EXPECT_EQ(kernel(WeightFormat::kW4A16, bound + 1, Isa::kAvx2), "w4a16 avx2 dequantized panels");
  }
  // The AVX-512 integer tiles name the panel-by-panel order of a small batch up to its bound.
  if (cpu_supports(Isa::kAvx512)) {
    auto why = [](WeightFormat f, int64_t m) { return describe_gemm(f, m, Isa::kAvx512, false).reason; };
    for (WeightFormat f : {WeightFormat::kInt8, WeightFormat::kW4A8}) {
      EXPECT_EQ(why(f, kDecodeMaxM).find("next panel"), npos) << weight_format_name(f);
      EXPECT_NE(why(f, kDecodeMaxM + 1).find("next panel"), npos) << weight_format_name(f);
      EXPECT_NE(why(f, kPanelPrefetchMaxM).find("next panel"), npos) << weight_format_name(f);
      EXPECT_EQ(why(f, kPanelPrefetchMaxM + 1).find("next panel"), npos) << weight_format_name(f);
    }
  }
}

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

// SPARK_DISABLE_CPU_FEATURES' list: each name turns its feature off and nothing else; empty entries are
// skipped; a misspelt name is an error, not silently a CPU with everything on.
TEST(CpuFeatures, DisableListTurnsNamedFeaturesOff) {
  const auto& fields = cpu_feature_fields();
  ASSERT_EQ(fields.size(), 14u);  // every bool of CpuFeatures
  CpuFeatures all;
  for (const CpuFeatureField& field : fields) all.*field.member = true;
  // Each name turns exactly its own feature off.
  for (const CpuFeatureField& field : fields) {
    CpuFeatures f = all;
    disable_cpu_features(f, field.name);
    for (const CpuFeatureField& other : fields) EXPECT_EQ(f.*other.member, &other != &field) << field.name;
  }
  CpuFeatures f = all;
  disable_cpu_features(f, "avx_vnni,,avx512_bf16,");
  EXPECT_FALSE(f.avx_vnni);
  EXPECT_FALSE(f.avx512_bf16);
  EXPECT_TRUE(f.avx2 && f.avx512f && f.avx512_vnni && f.avx512_vbmi && f.amx_bf16);
  f = all;
  disable_cpu_features(f, "");
  for (const CpuFeatureField& field : fields) EXPECT_TRUE(f.*field.member) << field.name;
  EXPECT_THROW(disable_cpu_features(f, "avx_vnni,avx-vnni"), Error);
  EXPECT_THROW(disable_cpu_features(f, "AVX2"), Error);
}

// The read loops fold every byte of their range into their result (four streams of a quarter each).
TEST(Roofline, ReadStreamsDependOnEveryByte) {
  constexpr size_t kBytes = 4096;
  std::vector<uint8_t> buf(kBytes + 64, 0);
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) / 64 * 64);
  std::vector<uint64_t (*)(const uint8_t*, size_t)> loops;
  if (cpu_supports(Isa::kAvx2)) loops.push_back(read_stream_avx2);
  if (cpu_supports(Isa::kAvx512)) loops.push_back(read_stream_avx512);
  for (auto* read : loops) {
    EXPECT_EQ(read(p, kBytes), 0u);
    for (size_t at = 0; at < kBytes; at += 61) {
      p[at] = 0x5a;
      EXPECT_NE(read(p, kBytes), 0u) << "byte " << at;
      p[at] = 0;
    }
  }
}

// The roofline probes run (and under the sanitizers, touch only their own memory); their values are
// machine facts, so only their sanity is checked, never a speed.
TEST(Roofline, MeasurementsAreFiniteAndPositive) {
  ThreadPool pool(2);
  const double bw = measure_read_bandwidth(pool, size_t{8} << 20, 1);
  EXPECT_TRUE(std::isfinite(bw));
  EXPECT_GT(bw, 0.0);
  if (cpu_supports(Isa::kAvx2)) {
    EXPECT_GT(measure_fma_peak(pool, 1), 0.0);
    EXPECT_GT(measure_int8_peak(pool, 1), 0.0);
  }
  // The bf16 and AMX peaks exist exactly where their instructions do (0 means "this CPU lacks them").
  const bool bf16 = cpu_supports(Isa::kAvx512) && cpu_features().avx512_bf16;
  EXPECT_EQ(measure_bf16_dot_peak(pool, 1) > 0.0, bf16);
  EXPECT_EQ(measure_amx_int8_peak(pool, 1) > 0.0, cpu_supports(Isa::kAmx) && cpu_features().amx_int8);
  EXPECT_EQ(measure_amx_bf16_peak(pool, 1) > 0.0, cpu_supports(Isa::kAmx) && cpu_features().amx_bf16);
}

// Two measurements combine figure by figure: each the higher, whichever measurement it came from (spark-bench
// --of-ceiling holds a row to the better of the measurements before and after it).
TEST(Roofline, HigherOfTakesEachFigureFromEitherMeasurement) {
  Roofline a, b;
  double Roofline::*const fields[] = {
      &Roofline::read_gbps_1t,   &Roofline::read_gbps,          &Roofline::fma_gflops_1t,
      &Roofline::fma_gflops,     &Roofline::int8_gops_1t,       &Roofline::int8_gops,
      &Roofline::bf16_gflops_1t, &Roofline::bf16_gflops,        &Roofline::amx_int8_gops_1t,
      &Roofline::amx_int8_gops,  &Roofline::amx_bf16_gflops_1t, &Roofline::amx_bf16_gflops};
  // Alternate which side is higher, so neither "take a" nor "take b" passes.
  for (size_t i = 0; i < std::size(fields); ++i) {
    a.*fields[i] = i % 2 == 0 ? 10.0 + i : 1.0;
    b.*fields[i] = i % 2 == 0 ? 2.0 : 20.0 + i;
  }
  a.threads = 2;
  a.isa = "avx512";
  const Roofline h = higher_of(a, b);
  for (size_t i = 0; i < std::size(fields); ++i)
    EXPECT_EQ(h.*fields[i], i % 2 == 0 ? 10.0 + i : 20.0 + i) << "field " << i;
  EXPECT_EQ(h.threads, 2);
  EXPECT_EQ(h.isa, "avx512");
}

// A roofline of a lower tier holds that tier to its own instructions: an avx2 roofline has no bf16-dot or
// AMX peak even on a CPU with both, and names its tier.
TEST(Roofline, LowerTierHasOnlyItsOwnPeaks) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx2);
  ThreadPool pool(1);
  EXPECT_GT(measure_fma_peak(pool, 1, Isa::kAvx2), 0.0);
  EXPECT_GT(measure_int8_peak(pool, 1, Isa::kAvx2), 0.0);
  EXPECT_EQ(measure_bf16_dot_peak(pool, 1, Isa::kAvx2), 0.0);
  EXPECT_EQ(measure_amx_int8_peak(pool, 1, Isa::kAvx2), 0.0);
  EXPECT_EQ(measure_amx_bf16_peak(pool, 1, Isa::kAvx2), 0.0);
  EXPECT_EQ(measure_amx_int8_fed(16 << 10, 1, Isa::kAvx512), 0.0);
  EXPECT_EQ(measure_fma_peak(pool, 1, Isa::kScalar), 0.0);
  if (cpu_supports(Isa::kAmx)) {
    EXPECT_GT(measure_amx_int8_peak(pool, 1, Isa::kAmx), 0.0);
  }
}

// Feeding the tiles from memory cannot beat feeding them from L1 (measured 5-7x slower on a Xeon); both are
// 0 exactly where AMX is missing.
TEST(Roofline, AmxTilesFedFromMemoryAreSlowerThanFromL1) {
  const bool amx = cpu_supports(Isa::kAmx) && cpu_features().amx_int8;
  const double l1 = measure_amx_int8_fed(16 << 10, 3), memory = measure_amx_int8_fed(size_t{256} << 20, 3);
  EXPECT_EQ(l1 > 0.0, amx);
  EXPECT_EQ(memory > 0.0, amx);
  if (amx) {
    EXPECT_LT(memory, l1);
  }
}

}  // namespace spark::kernels
