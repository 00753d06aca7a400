// Dynamic per-token int8 quantization of activations for the integer GEMMs (kInt8, kW4A8), and the
// per-thread scratch memory the GEMMs use for it (no allocation per call once warm).
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/thread_pool.h"

namespace spark::kernels {

struct QuantizedActivations {
  int64_t m = 0;
  int64_t k_pad = 0;              // row stride of q; columns past k hold zero (0x80 with offset128)
  int64_t groups = 0;             // number of 128-wide groups with a sum in group_sums (0: none computed)
  int8_t* q = nullptr;            // [m][k_pad]: q, or q + 128 stored as a byte when offset128
  float* scale = nullptr;         // [m]: x ≈ q · scale
  int32_t* group_sums = nullptr;  // [m][groups]: Σ q over each group of 128 columns (signed q)
};

// Quantizes one row as described below; a per-ISA version must give the same bytes as the scalar one.
using QuantizeRowFn = void (*)(const float* x, int64_t k, int64_t k_pad, int64_t groups, bool offset128,
                               int8_t* q, float* scale, int32_t* group_sums);

// Symmetric per row: scale = max|x| / 127, q = round-half-even(x · (127 / max|x|)) in [-127, 127]; a row
// of zeros gets scale 0. offset128 stores q + 128 (the unsigned operand vpdpbusd wants). rows_multiple
// rounds the rows up with zero rows (AMX tiles take 16 rows at a time). The result lives in the calling
// thread's scratch slot 0 until its next call. pool may be null (single thread). row_fn: a per-ISA row
// quantizer (null: the scalar one).
QuantizedActivations quantize_activations(const float* x, int64_t m, int64_t k, int64_t k_pad, int64_t groups,
                                          bool offset128, ThreadPool* pool, int64_t rows_multiple = 1,
                                          QuantizeRowFn row_fn = nullptr);

// Per-thread scratch: `bytes` bytes, 64-byte aligned, contents undefined; valid until the same thread asks
// for the same slot again. Slot 0 belongs to quantize_activations; slot 1 holds a call's bf16 or rounded
// activations, which the float kernels may read (they split theirs into slot 3).
void* scratch(int slot, size_t bytes);
constexpr int kScratchSlots = 4;

}  // namespace spark::kernels
