// One weight type for every linear layer of the model, whatever its storage format, and one GEMM entry
// point over it: y[M, N] = x[M, K] · Wᵀ with f32 activations and f32 outputs.
//
// Formats (bits per weight at Spark shapes in brackets):
//   kF32, kBF16, kF16  the checkpoint's float dtype, row-major [N, K] exactly as a torch Linear stores it,
//                      so a memory-mapped checkpoint tensor is used in place (32 / 16 / 16).
//   kInt8   W8A8: per-output-row symmetric int8 weights (scale = max|w| / 127), activations quantized per
//           token to symmetric int8 at each call, s32 accumulation (8.0).
//   kW4A8   4-bit symmetric weights, groups of 128 along K, zero point fixed at 8 (w = (q - 8) · scale),
//           f16 scale per group, activations quantized per token to int8, integer dot product per group
//           (4.125).
//   kW4A16  4-bit asymmetric weights, groups of 128 along K (w = q · scale + min, both f16, chosen per
//           group by a clipping search), activations rounded to bf16 at each call (relative 2^-9, far
//           below the weights' 4 bits) so AVX512-BF16 CPUs multiply with vdpbf16ps; every tier rounds
//           them the same way (4.25).
//
// Packed layouts (what a pre-quantized file stores; every tensor is little-endian and dense). All
// quantized formats pad N to n_pad = a multiple of 16 (rows of zeros) and K to k_pad (a multiple of 64
// for kInt8 and of 128 for the 4-bit formats; padding columns hold zero weights for kInt8 and kW4A8 and
// are multiplied by zero activations in every case). Rows are grouped in blocks of 16 (b = n / 16,
// r = n % 16):
//   kInt8   "qweight"  I8  [n_pad/16, k_pad/4, 16, 4]   byte ((b·k_pad/4 + k/4)·16 + r)·4 + k%4 = q[n, k].
//                      One 64-byte line holds 4 consecutive k of 16 rows: the operand of one vpdpbusd and
//                      one row of an AMX int8 B tile.
//           "scales"   F32 [n_pad]                       w[n, k] = q[n, k] · scales[n].
//           "row_sums" I32 [n_pad]                       Σ_k q[n, k]: the correction that lets VNNI
//                      multiply unsigned (x + 128) activations by signed weights.
//   kW4A8   "qweight"  U8  [n_pad/16, k_pad/8, 16, 4]   byte ((b·k_pad/8 + p)·16 + r)·4 + j holds
//                      q[n, 8p + j] in its low nibble and q[n, 8p + 4 + j] in its high nibble: one 64-byte
//                      line unpacks into two vpdpbusd operands (k = 8p..8p+3 and 8p+4..8p+7).
//           "scales"   F16 [n_pad/16, k_pad/128, 16]     scale of row n, group g at (b·G + g)·16 + r.
//   kW4A16  "qweight"  U8  [n_pad/16, k_pad/2, 16]       byte (b·k_pad/2 + p)·16 + r holds q[n, 2p] in
//                      its low nibble and q[n, 2p + 1] in its high nibble (16 rows of one k pair).
//           "params"   F16 [n_pad/16, k_pad/128, 2, 16]  ((b·G + g)·2 + 0)·16 + r = scale,
//                                                        ((b·G + g)·2 + 1)·16 + r = min.
//   float   "weight"   F32/BF16/F16 [n, k]               no padding.
// kLayoutVersion changes whenever any of this does; a pre-quantized file records it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gemm_float/gemm_float.h"
#include "util/thread_pool.h"

namespace spark::kernels {

enum class WeightFormat { kF32, kBF16, kF16, kInt8, kW4A8, kW4A16 };

constexpr int kLayoutVersion = 1;
constexpr int64_t kBlockRows = 16;   // N block of every quantized layout
constexpr int64_t kGroupSize = 128;  // K group of the 4-bit formats
constexpr int64_t kInt8KAlign = 64;  // K padding of kInt8 (one AMX tile row of int8)

const char* weight_format_name(WeightFormat format);  // "f32", "bf16", "f16", "int8", "w4a8", "w4a16"
// Parses a name weight_format_name returns; throws spark::Error naming the accepted values otherwise.
WeightFormat parse_weight_format(const std::string& name);
bool is_float_format(WeightFormat format);
// Storage bits per weight of a [n, k] matrix in `format`, counting scales and padding.
double bits_per_weight(WeightFormat format, int64_t n, int64_t k);

struct QuantizedWeight {
  WeightFormat format = WeightFormat::kF32;
  int64_t n = 0;      // output features
  int64_t k = 0;      // input features
  int64_t n_pad = 0;  // stored rows (== n for float formats)
  int64_t k_pad = 0;  // stored columns (== k for float formats)
  // Packed buffers in the layout above; they point into `owner` or into memory someone else keeps alive
  // (a mapped file). `scales` is the "scales" or "params" tensor; row_sums is set for kInt8 only.
  const void* qweight = nullptr;
  const void* scales = nullptr;
  const int32_t* row_sums = nullptr;
  std::shared_ptr<const void> owner;
  // kBF16 only: activations are rounded to bf16 before the products, on every tier (so results differ
  // between CPUs only in summation order), which lets AVX512-BF16 (vdpbf16ps) and AMX-BF16 run them: a
  // relative error of ~2^-9 per activation for faster prefill (bench/KERNELS.md has the figures per tier).
  // Off means exact f32 products.
  bool bf16_activations = false;

  int64_t groups() const { return k_pad / kGroupSize; }
  // The weight as a FloatWeight (float formats only).
  FloatWeight as_float() const;
  // Bytes of the packed buffers (what decode reads per call).
  size_t bytes() const;
};

// The element type of a float format (kF32 for the others).
FloatDType float_dtype_of(WeightFormat f);

// Non-owning view of a float weight (a checkpoint tensor stays where it is).
QuantizedWeight float_weight_view(const FloatWeight& src);

// Converts a float weight to `format`. Runs over the pool in blocks of 16 rows, so besides the result
// it allocates only one 16-row f32 block per thread. A float target in the source's own dtype returns a
// view of `src` (no copy); other float targets convert into an owned buffer.
QuantizedWeight quantize_weight(const FloatWeight& src, WeightFormat format, ThreadPool& pool);

// y[i, j] = Σ_k x[i, k] · w[j, k] for i < m, j < w.n. x has row stride w.k, y has row stride ldy >= w.n;
// columns of y past w.n are not touched. Picks the kernel from the weight's format, m and the active
// instruction set (see path_report.h for the choice and why).
void gemm(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy, ThreadPool& pool);

// Scalar reference of gemm, single-threaded. For kInt8 and kW4A8 it quantizes the activations and
// combines the integer dot products exactly as the fast kernels do, so they must match it bit for bit;
// for the float formats it accumulates in double.
void gemm_ref(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy);

// Widens row `row` of w (k values) to f32: an embedding lookup straight from the quantized table.
void dequantize_row(const QuantizedWeight& w, int64_t row, float* out);

// Serialization: the packed buffers as named tensors (names as in the layout above) ...
enum class TensorDType { kI8, kU8, kI32, kF16, kBF16, kF32 };
const char* tensor_dtype_name(TensorDType dtype);  // safetensors spelling: "I8", "U8", "I32", ...

struct PackedTensor {
  std::string name;
  TensorDType dtype = TensorDType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};
std::vector<PackedTensor> packed_tensors(const QuantizedWeight& w);

// ... and back: a QuantizedWeight that points into the given buffers (typically a mapped file) without
// copying or repacking. Every tensor the format needs must be present with exactly the expected dtype and
// shape; otherwise throws spark::Error naming `context` (e.g. the layer's tensor prefix) and the tensor.
QuantizedWeight view_packed_tensors(WeightFormat format, int64_t n, int64_t k,
                                    const std::vector<PackedTensor>& tensors, const std::string& context);

}  // namespace spark::kernels
