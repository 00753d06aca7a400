// Index arithmetic of the packed layouts documented in weight.h, shared by the quantizer, the scalar
// reference and the serializer. The fast kernels walk the same layouts with pointer increments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gemm/weight.h"

namespace spark::kernels::layout {

inline int64_t round_up(int64_t v, int64_t multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

inline int64_t padded_n(WeightFormat f, int64_t n) {
  return is_float_format(f) ? n : round_up(n, kBlockRows);
}

inline int64_t padded_k(WeightFormat f, int64_t k) {
  switch (f) {
    case WeightFormat::kInt8:
      return round_up(k, kInt8KAlign);
    case WeightFormat::kW4A8:
    case WeightFormat::kW4A16:
      return round_up(k, kGroupSize);
    default:
      return k;
  }
}

inline size_t qweight_bytes(WeightFormat f, int64_t n_pad, int64_t k_pad) {
  const size_t count = static_cast<size_t>(n_pad) * static_cast<size_t>(k_pad);
  switch (f) {
    case WeightFormat::kF32:
      return count * 4;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      return count * 2;
    case WeightFormat::kInt8:
      return count;
    case WeightFormat::kW4A8:
    case WeightFormat::kW4A16:
      return count / 2;
  }
  return 0;
}

// The "scales" (kInt8, kW4A8) or "params" (kW4A16) tensor.
inline size_t scales_bytes(WeightFormat f, int64_t n_pad, int64_t k_pad) {
  const size_t groups = static_cast<size_t>(k_pad / kGroupSize);
  switch (f) {
    case WeightFormat::kInt8:
      return static_cast<size_t>(n_pad) * 4;
    case WeightFormat::kW4A8:
      return static_cast<size_t>(n_pad) * groups * 2;
    case WeightFormat::kW4A16:
      return static_cast<size_t>(n_pad) * groups * 4;
    default:
      return 0;
  }
}

inline size_t row_sums_bytes(WeightFormat f, int64_t n_pad) {
  return f == WeightFormat::kInt8 ? static_cast<size_t>(n_pad) * 4 : 0;
}

// kInt8: byte offset of q[n, k].
inline size_t int8_offset(int64_t k_pad, int64_t n, int64_t k) {
  const int64_t b = n / kBlockRows, r = n % kBlockRows;
  return static_cast<size_t>(((b * (k_pad / 4) + k / 4) * kBlockRows + r) * 4 + k % 4);
}

// kW4A8: byte offset holding q[n, k]; *high tells which nibble.
inline size_t w4a8_offset(int64_t k_pad, int64_t n, int64_t k, bool* high) {
  const int64_t b = n / kBlockRows, r = n % kBlockRows;
  const int64_t p = k / 8, j = k % 8;
  *high = j >= 4;
  return static_cast<size_t>(((b * (k_pad / 8) + p) * kBlockRows + r) * 4 + (j % 4));
}

// kW4A8: element index of the scale of row n, group g (G groups).
inline size_t w4a8_scale_index(int64_t groups, int64_t n, int64_t g) {
  return static_cast<size_t>(((n / kBlockRows) * groups + g) * kBlockRows + n % kBlockRows);
}

// kW4A16: byte offset holding q[n, k]; *high tells which nibble.
inline size_t w4a16_offset(int64_t k_pad, int64_t n, int64_t k, bool* high) {
  const int64_t b = n / kBlockRows, r = n % kBlockRows;
  *high = (k & 1) != 0;
  return static_cast<size_t>((b * (k_pad / 2) + k / 2) * kBlockRows + r);
}

// kW4A16: element index of the scale (which = 0) or min (which = 1) of row n, group g.
inline size_t w4a16_param_index(int64_t groups, int64_t n, int64_t g, int which) {
  return static_cast<size_t>((((n / kBlockRows) * groups + g) * 2 + which) * kBlockRows + n % kBlockRows);
}

inline int nibble(const uint8_t* base, size_t offset, bool high) {
  return high ? base[offset] >> 4 : base[offset] & 0x0f;
}

}  // namespace spark::kernels::layout
