#include "gemm/dispatch.h"

#include "cpu/decode_rows.h"
#include "gemm/activations.h"
#include "gemm_float/gemm_float_isa.h"
#include "spark/error.h"
#include "util/half.h"

namespace spark::kernels {

namespace {

// W4A8 takes the AMX tiles from 16 rows: there the tiles that unpack a group at a time into L1 were ahead of
// the VNNI tiles in 7 of 9 runs over three shapes (one tie); at 12 rows VNNI wins (bench/RESULTS.md,
// session 15).
constexpr int64_t kW4A8AmxMinRows = 16;

// What row_dot_chunks' prefetch adds to the path report (decode_rows.h).
constexpr const char* kChunksAskNext = ", the next 16 asked for as the chunks go";

// What the decode bodies (up to kDecodeMaxM rows; the row dots up to one chunk of rows, RowPasses in
// cpu/decode_rows.h) say of their `rows` activation rows.
std::string one_pass_rows(int64_t rows) {
  return "m <= " + std::to_string(rows) +
         ": every weight is read once and reused from registers for all rows";
}

// W4A16 takes the AMX tiles from 8 rows: at 5 rows they (widening each task's blocks first) and the
// AVX512-BF16 tiles tie (bench/RESULTS.md, session 11).
constexpr int64_t kW4A16AmxMinRows = 8;

enum class Kernel {
  kScalar,
  kFloatAvx2,
  kFloatAvx512,
  kFloatRoundedAvx2,  // bf16 weights with bf16_activations on CPUs without vdpbf16ps
  kFloatRoundedAvx512,
  kInt8Avx2,
  kInt8AvxVnni,  // the AVX2 tiles with AVX-VNNI's vpdpbusd
  kInt8Avx512,
  kW4A8Avx2,
  kW4A8AvxVnni,
  kW4A8Avx512,
  kW4A16Avx2,
  kW4A16Avx512,
  kW4A16Bf16Avx512,
  kW4A16Amx,
  kInt8Amx,
  kW4A8Amx,
  kBf16DotAvx512,
  kBf16Amx,
};

void float_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                ThreadPool& pool) {
  gemm_float_avx2(x, m, w.as_float(), y, ldy, pool);
}

void float_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                  ThreadPool& pool) {
  gemm_float_avx512(x, m, w.as_float(), y, ldy, pool);
}

// bf16_activations without vdpbf16ps: the activations are rounded to bf16 first, so every tier multiplies
// the same numbers and only the summation order differs between CPUs. Scratch slot 1 (the float kernels
// use none).
const float* bf16_rounded(const float* x, int64_t m, int64_t k) {
  auto* out = static_cast<float*>(scratch(1, static_cast<size_t>(m * k) * sizeof(float)));
  for (int64_t i = 0; i < m * k; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return out;
}

void float_rounded_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                        ThreadPool& pool) {
  gemm_float_avx2(bf16_rounded(x, m, w.k), m, w.as_float(), y, ldy, pool);
}

void float_rounded_avx512(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                          ThreadPool& pool) {
  gemm_float_avx512(bf16_rounded(x, m, w.k), m, w.as_float(), y, ldy, pool);
}

Kernel select_kernel(WeightFormat format, int64_t m, Isa isa, bool bf16_activations) {
  if (isa == Isa::kScalar) return Kernel::kScalar;
  const bool avx512 = isa >= Isa::kAvx512;
  const bool amx_tiles = isa >= Isa::kAmx && m > kDecodeMaxM;
  if (format == WeightFormat::kBF16 && bf16_activations && avx512 && cpu_features().avx512_bf16) {
    return amx_tiles ? Kernel::kBf16Amx : Kernel::kBf16DotAvx512;
  }
  switch (format) {
    case WeightFormat::kBF16:
      if (bf16_activations) return avx512 ? Kernel::kFloatRoundedAvx512 : Kernel::kFloatRoundedAvx2;
      return avx512 ? Kernel::kFloatAvx512 : Kernel::kFloatAvx2;
    case WeightFormat::kF32:
    case WeightFormat::kF16:
      return avx512 ? Kernel::kFloatAvx512 : Kernel::kFloatAvx2;
    case WeightFormat::kInt8:
      if (amx_tiles) return Kernel::kInt8Amx;
      if (avx512) return Kernel::kInt8Avx512;
      return cpu_features().avx_vnni ? Kernel::kInt8AvxVnni : Kernel::kInt8Avx2;
    case WeightFormat::kW4A8:
      // The AMX tiles unpack the weights to bytes in memory before their products; below kW4A8AmxMinRows
      // activation rows that costs more than the VNNI tiles, which unpack in registers.
      if (amx_tiles && m >= kW4A8AmxMinRows) return Kernel::kW4A8Amx;
      if (avx512) return Kernel::kW4A8Avx512;
      return cpu_features().avx_vnni ? Kernel::kW4A8AvxVnni : Kernel::kW4A8Avx2;
    case WeightFormat::kW4A16:
      if (avx512 && cpu_features().avx512_bf16 && cpu_features().avx512_vbmi) {
        if (amx_tiles && cpu_features().amx_bf16 && m >= kW4A16AmxMinRows) return Kernel::kW4A16Amx;
        return Kernel::kW4A16Bf16Avx512;
      }
      return avx512 ? Kernel::kW4A16Avx512 : Kernel::kW4A16Avx2;
  }
  throw Error("select_gemm: unknown weight format");
}

GemmFn kernel_fn(Kernel k) {
  switch (k) {
    case Kernel::kScalar:
      return gemm_scalar;
    case Kernel::kFloatAvx2:
      return float_avx2;
    case Kernel::kFloatAvx512:
      return float_avx512;
    case Kernel::kFloatRoundedAvx2:
      return float_rounded_avx2;
    case Kernel::kFloatRoundedAvx512:
      return float_rounded_avx512;
    case Kernel::kInt8Avx2:
      return gemm_int8_avx2;
    case Kernel::kInt8AvxVnni:
      return gemm_int8_avxvnni;
    case Kernel::kInt8Avx512:
      return gemm_int8_avx512;
    case Kernel::kW4A8Avx2:
      return gemm_w4a8_avx2;
    case Kernel::kW4A8AvxVnni:
      return gemm_w4a8_avxvnni;
    case Kernel::kW4A8Avx512:
      return gemm_w4a8_avx512;
    case Kernel::kW4A16Avx2:
      return gemm_w4a16_avx2;
    case Kernel::kW4A16Avx512:
      return gemm_w4a16_avx512;
    case Kernel::kW4A16Bf16Avx512:
      return gemm_w4a16_bf16_avx512;
    case Kernel::kInt8Amx:
      return gemm_int8_amx;
    case Kernel::kW4A8Amx:
      return gemm_w4a8_amx;
    case Kernel::kW4A16Amx:
      return gemm_w4a16_amx;
    case Kernel::kBf16DotAvx512:
      return gemm_bf16dot_avx512;
    case Kernel::kBf16Amx:
      return gemm_bf16_amx;
  }
  return gemm_scalar;
}

}  // namespace

const char* arithmetic_name(Arithmetic a) {
  switch (a) {
    case Arithmetic::kF32Fma:
      return "f32 FMA";
    case Arithmetic::kInt8Dot:
      return "int8 dot";
    case Arithmetic::kBf16Dot:
      return "bf16 dot";
    case Arithmetic::kAmxInt8:
      return "AMX int8";
    case Arithmetic::kAmxBf16:
      return "AMX bf16";
  }
  return "?";
}

GemmFn select_gemm(WeightFormat format, int64_t m, Isa isa, bool bf16_activations) {
  return kernel_fn(select_kernel(format, m, isa, bf16_activations));
}

GemmChoice describe_gemm(WeightFormat format, int64_t m, Isa isa, bool bf16_activations) {
  const bool decode = m <= kDecodeMaxM;
  const std::string fmt = weight_format_name(format);
  const std::string rows =
      decode ? one_pass_rows(kDecodeMaxM)
             : "m > " + std::to_string(kDecodeMaxM) + ": M x N tiles, weights reused from cache";
  const Kernel kernel = select_kernel(format, m, isa, bf16_activations);
  const std::string panels =
      !decode && m <= kPanelPrefetchMaxM
          ? "; m <= " + std::to_string(kPanelPrefetchMaxM) +
                ": the row tiles run on one panel of 32 weight rows at a time and ask for the next panel's "
                "lines as they go"
          : "";
  switch (kernel) {
    case Kernel::kScalar:
      return {fmt + " scalar reference", "no AVX2+FMA+F16C on this CPU (or SPARK_FORCE_ISA=scalar)"};
    case Kernel::kFloatAvx2:
    case Kernel::kFloatAvx512:
    case Kernel::kFloatRoundedAvx2:
    case Kernel::kFloatRoundedAvx512: {
      const bool avx512 = isa >= Isa::kAvx512;
      const int64_t dots_max = float_row_dots_max_m(float_dtype_of(format), avx512);
      const bool rounded = bf16_activations && format == WeightFormat::kBF16;
      const std::string act = rounded ? " on activations rounded to bf16 (no vdpbf16ps on this tier)" : "";
      const std::string load = avx512 && format == WeightFormat::kBF16
                                   ? "each bf16 line used in place as its even and odd elements in f32"
                                   : "weights widened to f32 in registers";
      const int64_t chunk_rows = avx512 ? kDecodeMaxM : kFloatAvx2ChunkRows;
      if (!decode && m <= chunk_rows) {  // one chunk: the decode row dots
        return {fmt + (avx512 ? " avx512" : " avx2") + " row dots",
                one_pass_rows(chunk_rows) + "; bandwidth-bound, " + load + act};
      }
      if (!decode && m <= dots_max) {
        const std::string next =
            avx512 && format == WeightFormat::kBF16 && m <= kRowChunksPrefetchMaxM ? kChunksAskNext : "";
        return {fmt + (avx512 ? " avx512" : " avx2") + " row dots in chunks",
                "m <= " + std::to_string(dots_max) + ": the row dots on chunks of at most " +
                    std::to_string(chunk_rows) + " rows, 16 weight rows at a time read once from memory" +
                    next + "; " + load + act};
      }
      return {fmt + (avx512 ? " avx512" : " avx2") + (decode ? " row dots" : " widened panels"),
              decode ? rows + "; bandwidth-bound, " + load + act
                     : "m > " + std::to_string(dots_max) + ": M x N tiles, weights reused from cache; " +
                           (rounded ? "f32" : "exact f32") + " products on a " + (avx512 ? "12x32" : "6x16") +
                           " register tile" + act};
    }
    case Kernel::kInt8Avx2:
      return {"int8 avx2 " + std::string(decode ? "gemv" : "tiles"),
              rows + "; vpmaddubsw with the sign trick (|x| times sign-adjusted w) cannot saturate",
              Arithmetic::kInt8Dot};
    case Kernel::kInt8AvxVnni:
      return {
          "int8 avx2 avx-vnni " + std::string(decode ? "gemv" : "tiles"),
          rows + "; vpdpbusd (AVX-VNNI, ymm) on (x + 128) x w, exact after subtracting 128 x stored row sums",
          Arithmetic::kInt8Dot};
    case Kernel::kInt8Avx512:
      return {"int8 avx512-vnni " + std::string(decode ? "gemv" : "tiles"),
              rows + "; vpdpbusd on (x + 128) x w, exact after subtracting 128 x stored row sums" + panels,
              Arithmetic::kInt8Dot};
    case Kernel::kW4A8Avx2:
      return {"w4a8 avx2 " + std::string(decode ? "gemv" : "tiles"),
              rows + "; nibbles unpacked in registers into vpmaddubsw (q <= 15 cannot saturate)",
              Arithmetic::kInt8Dot};
    case Kernel::kW4A8AvxVnni:
      return {"w4a8 avx2 avx-vnni " + std::string(decode ? "gemv" : "tiles"),
              rows +
                  "; nibbles unpacked in registers into vpdpbusd (AVX-VNNI, ymm), zero point via activation "
                  "group sums",
              Arithmetic::kInt8Dot};
    case Kernel::kW4A8Avx512:
      return {"w4a8 avx512-vnni " + std::string(decode ? "gemv" : "tiles"),
              rows + "; nibbles unpacked in registers into vpdpbusd, zero point via activation group sums" +
                  (isa >= Isa::kAmx && !decode ? " (AMX from " + std::to_string(kW4A8AmxMinRows) +
                                                     " rows: below, unpacking for the tiles costs more)"
                                               : "") +
                  panels,
              Arithmetic::kInt8Dot};
    case Kernel::kBf16DotAvx512:
      if (!decode && m <= kBf16DotChunkRows) {  // one chunk: the decode row dots
        return {"bf16 avx512-bf16 row dots",
                one_pass_rows(kBf16DotChunkRows) +
                    "; vdpbf16ps with activations rounded to bf16 (bf16_activations)",
                Arithmetic::kBf16Dot};
      }
      if (!decode && m <= kBf16DotRowDotsMaxM) {
        return {"bf16 avx512-bf16 row dots in chunks",
                "m <= " + std::to_string(kBf16DotRowDotsMaxM) + ": the row dots on chunks of at most " +
                    std::to_string(kBf16DotChunkRows) +
                    " rows, 16 weight rows at a time read once from memory" +
                    (m <= kRowChunksPrefetchMaxM ? kChunksAskNext : "") +
                    "; vdpbf16ps with activations rounded to bf16 (bf16_activations)",
                Arithmetic::kBf16Dot};
      }
      return {
          std::string("bf16 avx512-bf16 ") + (decode ? "row dots" : "pair panels"),
          (decode
               ? rows
               : "m > " + std::to_string(kBf16DotRowDotsMaxM) + ": M x N tiles, weights reused from cache") +
              "; vdpbf16ps with activations rounded to bf16 (bf16_activations): 2x the products of an f32 "
              "FMA, relative error ~2^-9 per activation",
          Arithmetic::kBf16Dot};
    case Kernel::kBf16Amx:
      return {"bf16 amx tiles",
              rows +
                  "; tdpbf16ps with activations rounded to bf16 (bf16_activations), weight "
                  "rows re-laid as B tiles once per task of 256 rows",
              Arithmetic::kAmxBf16};
    case Kernel::kInt8Amx:
      return {"int8 amx tiles",
              rows +
                  "; tdpbssd on 16x64 activation by 64x16 weight tiles (the packed lines are "
                  "B-tile rows), 16384 multiply-adds per instruction where vpdpbusd does 64",
              Arithmetic::kAmxInt8};
    case Kernel::kW4A8Amx:
      return {"w4a8 amx tiles",
              rows +
                  "; weights unpacked to signed bytes q - 8 (the zero point folded in), a group at a time "
                  "into L1 (tasks of up to 128 rows) or whole once per task, tdpbssd per group of 128",
              Arithmetic::kAmxInt8};
    case Kernel::kW4A16Amx:
      return {"w4a16 amx tiles",
              rows +
                  "; nibbles widened to the exact bf16 of 1 + q/16 as B tiles once per task of 256 rows, "
                  "tdpbf16ps on bf16 activations, per group 16 scale * sum(x*(1+q/16)) + (min - 16 scale) * "
                  "sum(x)",
              Arithmetic::kAmxBf16};
    case Kernel::kW4A16Bf16Avx512:
      return {std::string("w4a16 avx512-bf16 ") + (decode ? "gemv" : "tiles"),
              rows + "; nibbles turned into bf16 in registers (one vpermb per 64-byte line, shifts, " +
                  "vpternlogd), vdpbf16ps on " +
                  "bf16 activations, per group 16 scale * sum(x*(1+q/16)) + (min - 16 scale) * sum(x)" +
                  (decode ? "" : "; 8x32 tiles unpack each line once per 8 rows") + panels,
              Arithmetic::kBf16Dot};
    case Kernel::kW4A16Avx2:
    case Kernel::kW4A16Avx512: {
      const std::string isa_word = isa >= Isa::kAvx512 ? " avx512" : " avx2";
      const int64_t tiles_max = w4a16_f32_tiles_max_m(kernel == Kernel::kW4A16Avx512);
      if (!decode && m <= tiles_max) {
        return {"w4a16" + isa_word + " tiles",
                "m <= " + std::to_string(tiles_max) +
                    ": register tiles of 4 rows over 64 x 64 tasks, weights reused from cache; per group "
                    "scale * sum(x*q) + min * sum(x)"};
      }
      if (decode && kernel == Kernel::kW4A16Avx2 && m <= kW4A16Avx2GridMaxM) {
        return {
            "w4a16 avx2 gemv (integer grids)",
            rows +
                "; per group the bf16 activations split into two 16-bit grids (exact down to 2^-22 of the "
                "group's largest), vpmaddwd on the "
                "nibbles (vpshufb + vpand per 8 weight rows), scale * sum(x*q) + min * sum(x)"};
      }
      if (decode) {
        return {"w4a16" + isa_word + " gemv (widen in registers)",
                rows + "; per group scale * sum(x*q) + min * sum(x): 4.25 bits read per weight"};
      }
      return {"w4a16" + isa_word + " dequantized panels",
              "m > " + std::to_string(tiles_max) +
                  ": a per-row 4-bit GEMV costs m times the unpacking, so weights are dequantized once per "
                  "tile and reused by every row (f32 micro-kernel)"};
    }
  }
  return {fmt, ""};
}

void gemm_at(Isa isa, const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
             ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  select_gemm(w.format, m, isa, w.bf16_activations)(x, m, w, y, ldy, pool);
}

void gemm(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy, ThreadPool& pool) {
  gemm_at(active_isa(), x, m, w, y, ldy, pool);
}

}  // namespace spark::kernels
