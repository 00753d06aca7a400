#include "gemm/weight.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "gemm/layout.h"
#include "spark/error.h"
#include "util/half.h"

namespace spark::kernels {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << ']';
  return s.str();
}

}  // namespace

FloatDType float_dtype_of(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBF16:
      return FloatDType::kBF16;
    case WeightFormat::kF16:
      return FloatDType::kF16;
    default:
      return FloatDType::kF32;
  }
}

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kInt8:
      return "int8";
    case WeightFormat::kW4A8:
      return "w4a8";
    case WeightFormat::kW4A16:
      return "w4a16";
  }
  return "?";
}

WeightFormat parse_weight_format(const std::string& name) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16, WeightFormat::kInt8,
                         WeightFormat::kW4A8, WeightFormat::kW4A16}) {
    if (name == weight_format_name(f)) return f;
  }
  throw Error("unknown weight format '" + name + "' (use f32, bf16, f16, int8, w4a8 or w4a16)");
}

bool is_float_format(WeightFormat format) {
  return format == WeightFormat::kF32 || format == WeightFormat::kBF16 || format == WeightFormat::kF16;
}

double bits_per_weight(WeightFormat format, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return 0.0;
  const int64_t np = layout::padded_n(format, n), kp = layout::padded_k(format, k);
  const size_t total = layout::qweight_bytes(format, np, kp) + layout::scales_bytes(format, np, kp) +
                       layout::row_sums_bytes(format, np);
  return 8.0 * static_cast<double>(total) / (static_cast<double>(n) * static_cast<double>(k));
}

const char* tensor_dtype_name(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kI8:
      return "I8";
    case TensorDType::kU8:
      return "U8";
    case TensorDType::kI32:
      return "I32";
    case TensorDType::kF16:
      return "F16";
    case TensorDType::kBF16:
      return "BF16";
    case TensorDType::kF32:
      return "F32";
  }
  return "?";
}

FloatWeight QuantizedWeight::as_float() const {
  if (!is_float_format(format)) {
    throw Error(std::string("as_float: a ") + weight_format_name(format) + " weight is not a float weight");
  }
  return FloatWeight{float_dtype_of(format), qweight, n, k};
}

size_t QuantizedWeight::bytes() const {
  return layout::qweight_bytes(format, n_pad, k_pad) + layout::scales_bytes(format, n_pad, k_pad) +
         layout::row_sums_bytes(format, n_pad);
}

QuantizedWeight float_weight_view(const FloatWeight& src) {
  QuantizedWeight w;
  switch (src.dtype) {
    case FloatDType::kF32:
      w.format = WeightFormat::kF32;
      break;
    case FloatDType::kBF16:
      w.format = WeightFormat::kBF16;
      break;
    case FloatDType::kF16:
      w.format = WeightFormat::kF16;
      break;
  }
  w.n = w.n_pad = src.n;
  w.k = w.k_pad = src.k;
  w.qweight = src.data;
  return w;
}

void dequantize_row(const QuantizedWeight& w, int64_t row, float* out) {
  if (row < 0 || row >= w.n) throw Error("dequantize_row: row " + std::to_string(row) + " out of range");
  const auto* q = static_cast<const uint8_t*>(w.qweight);
  const int64_t groups = w.groups();
  switch (w.format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
      float_weight_to_f32(w.as_float(), row * w.k, w.k, out);
      return;
    case WeightFormat::kInt8: {
      const float s = static_cast<const float*>(w.scales)[row];
      for (int64_t k = 0; k < w.k; ++k) {
        out[k] = static_cast<float>(static_cast<int8_t>(q[layout::int8_offset(w.k_pad, row, k)])) * s;
      }
      return;
    }
    case WeightFormat::kW4A8: {
      const auto* scales = static_cast<const uint16_t*>(w.scales);
      for (int64_t g = 0; g < groups; ++g) {
        const float s = f16_to_f32(scales[layout::w4a8_scale_index(groups, row, g)]);
        for (int64_t k = g * kGroupSize; k < std::min(w.k, (g + 1) * kGroupSize); ++k) {
          bool high = false;
          const size_t off = layout::w4a8_offset(w.k_pad, row, k, &high);
          out[k] = static_cast<float>(layout::nibble(q, off, high) - 8) * s;
        }
      }
      return;
    }
    case WeightFormat::kW4A16: {
      const auto* params = static_cast<const uint16_t*>(w.scales);
      for (int64_t g = 0; g < groups; ++g) {
        const float s = f16_to_f32(params[layout::w4a16_param_index(groups, row, g, 0)]);
        const float mn = f16_to_f32(params[layout::w4a16_param_index(groups, row, g, 1)]);
        for (int64_t k = g * kGroupSize; k < std::min(w.k, (g + 1) * kGroupSize); ++k) {
          bool high = false;
          const size_t off = layout::w4a16_offset(w.k_pad, row, k, &high);
          out[k] = std::fma(static_cast<float>(layout::nibble(q, off, high)), s, mn);
        }
      }
      return;
    }
  }
}

std::vector<PackedTensor> packed_tensors(const QuantizedWeight& w) {
  const int64_t np = w.n_pad, kp = w.k_pad, nb = w.n_pad / kBlockRows, groups = w.groups();
  const size_t qbytes = layout::qweight_bytes(w.format, np, kp);
  const size_t sbytes = layout::scales_bytes(w.format, np, kp);
  switch (w.format) {
    case WeightFormat::kF32:
      return {{"weight", TensorDType::kF32, {w.n, w.k}, w.qweight, qbytes}};
    case WeightFormat::kBF16:
      return {{"weight", TensorDType::kBF16, {w.n, w.k}, w.qweight, qbytes}};
    case WeightFormat::kF16:
      return {{"weight", TensorDType::kF16, {w.n, w.k}, w.qweight, qbytes}};
    case WeightFormat::kInt8:
      return {{"qweight", TensorDType::kI8, {nb, kp / 4, kBlockRows, 4}, w.qweight, qbytes},
              {"scales", TensorDType::kF32, {np}, w.scales, sbytes},
              {"row_sums", TensorDType::kI32, {np}, w.row_sums, layout::row_sums_bytes(w.format, np)}};
    case WeightFormat::kW4A8:
      return {{"qweight", TensorDType::kU8, {nb, kp / 8, kBlockRows, 4}, w.qweight, qbytes},
              {"scales", TensorDType::kF16, {nb, groups, kBlockRows}, w.scales, sbytes}};
    case WeightFormat::kW4A16:
      return {{"qweight", TensorDType::kU8, {nb, kp / 2, kBlockRows}, w.qweight, qbytes},
              {"params", TensorDType::kF16, {nb, groups, 2, kBlockRows}, w.scales, sbytes}};
  }
  return {};
}

QuantizedWeight view_packed_tensors(WeightFormat format, int64_t n, int64_t k,
                                    const std::vector<PackedTensor>& tensors, const std::string& context) {
  if (n <= 0 || k <= 0) {
    throw Error(context + ": invalid " + weight_format_name(format) + " weight shape [" + std::to_string(n) +
                ", " + std::to_string(k) + "]");
  }
  // The expected tensors are exactly those packed_tensors would produce for this shape.
  QuantizedWeight w;
  w.format = format;
  w.n = n;
  w.k = k;
  w.n_pad = layout::padded_n(format, n);
  w.k_pad = layout::padded_k(format, k);
  for (const PackedTensor& want : packed_tensors(w)) {
    const PackedTensor* got = nullptr;
    for (const PackedTensor& t : tensors) {
      if (t.name == want.name) got = &t;
    }
    if (got == nullptr) {
      throw Error(context + ": missing tensor '" + want.name + "' of a " + weight_format_name(format) +
                  " weight");
    }
    if (got->dtype != want.dtype || got->shape != want.shape || got->bytes != want.bytes ||
        got->data == nullptr) {
      throw Error(context + "." + want.name + ": expected " + tensor_dtype_name(want.dtype) + " " +
                  shape_string(want.shape) + " for a " + weight_format_name(format) + " [" +
                  std::to_string(n) + ", " + std::to_string(k) + "] weight, got " +
                  tensor_dtype_name(got->dtype) + " " + shape_string(got->shape) + " (" +
                  std::to_string(got->bytes) + " bytes)");
    }
    if (want.name == "weight" || want.name == "qweight") {
      w.qweight = got->data;
    } else if (want.name == "row_sums") {
      w.row_sums = static_cast<const int32_t*>(got->data);
    } else {
      w.scales = got->data;
    }
  }
  return w;
}

}  // namespace spark::kernels
