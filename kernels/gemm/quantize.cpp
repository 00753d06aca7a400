// quantize_weight: float checkpoint weights to the packed formats of weight.h. Each pool task converts
// one block of 16 rows to f32, quantizes it and writes that block of every packed tensor, so the only
// transient memory is one 16 x K f32 block per thread (whole-matrix repacks spiked the Python port's
// peak memory by 0.5-1 GB).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "gemm/layout.h"
#include "gemm/weight.h"
#include "spark/error.h"
#include "util/half.h"

namespace spark::kernels {

namespace {

// Outcome of one group's search; `bad` flags a group whose scale does not fit in f16.
struct GroupResult {
  uint16_t scale = 0;
  uint16_t min = 0;
  bool bad = false;
};

std::shared_ptr<void> allocate_aligned(size_t bytes) {
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  if (p == nullptr)
    throw Error("quantize_weight: out of memory allocating " + std::to_string(bytes) + " bytes");
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

// Symmetric 4-bit with the zero point at 8: w ≈ (q - 8)·d. Candidates map the largest-magnitude value
// to -8 (using all 16 levels, as llama.cpp's Q4_0 does) or ±max to ±7, each shrunk by a few clipping
// ratios; the one with the lowest squared error wins.
GroupResult w4a8_group(const float* v, int len, uint8_t* q) {
  float amax = 0.0f, vmax = 0.0f;
  for (int i = 0; i < len; ++i) {
    if (std::fabs(v[i]) > amax) {
      amax = std::fabs(v[i]);
      vmax = v[i];
    }
  }
  GroupResult res;
  if (amax == 0.0f) {
    std::fill(q, q + len, uint8_t{8});
    return res;
  }
  auto quant = [](float x, float inv) {
    return static_cast<uint8_t>(std::clamp(std::nearbyint(x * inv) + 8.0f, 0.0f, 15.0f));
  };
  double best_err = std::numeric_limits<double>::infinity();
  uint16_t best = 0;
  const float bases[] = {vmax / -8.0f, amax / 7.0f};
  const float ratios[] = {1.0f, 0.95f, 0.9f, 0.85f};
  for (float base : bases) {
    for (float r : ratios) {
      const uint16_t h = f32_to_f16(base * r);
      const float d = f16_to_f32(h);
      if (!std::isfinite(d) || d == 0.0f) continue;
      const float inv = 1.0f / d;
      double err = 0.0;
      for (int i = 0; i < len; ++i) {
        const double e = v[i] - (static_cast<float>(quant(v[i], inv)) - 8.0f) * d;
        err += e * e;
      }
      if (err < best_err) {
        best_err = err;
        best = h;
      }
    }
  }
  if (!std::isfinite(best_err)) {
    res.bad = true;
    return res;
  }
  res.scale = best;
  const float inv = 1.0f / f16_to_f32(best);
  for (int i = 0; i < len; ++i) q[i] = quant(v[i], inv);
  return res;
}

// Asymmetric 4-bit: w ≈ q·s + m. Tries the min/max range shrunk by a few clipping ratios, then a
// least-squares refit of (s, m) for the best assignment; keeps the lowest squared error. Errors are
// measured with s and m rounded to f16, as they are stored.
GroupResult w4a16_group(const float* v, int len, uint8_t* q) {
  float lo = v[0], hi = v[0];
  for (int i = 1; i < len; ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
  GroupResult res;
  double best_err = std::numeric_limits<double>::infinity();
  auto evaluate = [&](float s, float m) {
    const uint16_t hs = f32_to_f16(s), hm = f32_to_f16(m);
    const float sd = f16_to_f32(hs), md = f16_to_f32(hm);
    if (!std::isfinite(sd) || !std::isfinite(md) || sd < 0.0f) return;
    const float inv = sd > 0.0f ? 1.0f / sd : 0.0f;
    double err = 0.0;
    for (int i = 0; i < len; ++i) {
      const float qi = std::clamp(std::nearbyint((v[i] - md) * inv), 0.0f, 15.0f);
      const double e = v[i] - std::fma(qi, sd, md);
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      res.scale = hs;
      res.min = hm;
    }
  };
  auto assign = [&] {
    const float sd = f16_to_f32(res.scale), md = f16_to_f32(res.min);
    const float inv = sd > 0.0f ? 1.0f / sd : 0.0f;
    for (int i = 0; i < len; ++i)
      q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint((v[i] - md) * inv), 0.0f, 15.0f));
  };
  for (float r : {1.0f, 0.95f, 0.9f, 0.85f, 0.8f}) evaluate((hi - lo) * r / 15.0f, lo * r);
  if (!std::isfinite(best_err)) {
    res.bad = true;
    return res;
  }
  assign();
  // Least squares for the chosen levels: minimise Σ (v - q·s - m)².
  double sq = 0, sqq = 0, sv = 0, sqv = 0;
  for (int i = 0; i < len; ++i) {
    sq += q[i];
    sqq += static_cast<double>(q[i]) * q[i];
    sv += v[i];
    sqv += static_cast<double>(q[i]) * v[i];
  }
  const double det = len * sqq - sq * sq;
  if (det > 0) {
    const double s = (len * sqv - sq * sv) / det;
    evaluate(static_cast<float>(s), static_cast<float>((sv - s * sq) / len));
    assign();
  }
  return res;
}

// Everything a block task writes into.
struct Packed {
  QuantizedWeight w;
  uint8_t* qweight = nullptr;
  uint8_t* scales = nullptr;
  int32_t* row_sums = nullptr;
};

Packed allocate_packed(WeightFormat format, int64_t n, int64_t k) {
  Packed p;
  p.w.format = format;
  p.w.n = n;
  p.w.k = k;
  p.w.n_pad = layout::padded_n(format, n);
  p.w.k_pad = layout::padded_k(format, k);
  const size_t qb = layout::qweight_bytes(format, p.w.n_pad, p.w.k_pad);
  const size_t sb = layout::scales_bytes(format, p.w.n_pad, p.w.k_pad);
  const size_t rb = layout::row_sums_bytes(format, p.w.n_pad);
  const size_t s_off = layout::round_up(static_cast<int64_t>(qb), 64);
  const size_t r_off = s_off + layout::round_up(static_cast<int64_t>(sb), 64);
  auto storage = allocate_aligned(r_off + rb);
  auto* base = static_cast<uint8_t*>(storage.get());
  p.qweight = base;
  p.scales = sb ? base + s_off : nullptr;
  p.row_sums = rb ? reinterpret_cast<int32_t*>(base + r_off) : nullptr;
  p.w.qweight = p.qweight;
  p.w.scales = p.scales;
  p.w.row_sums = p.row_sums;
  p.w.owner = std::move(storage);
  return p;
}

// Quantizes rows [16b, 16b + valid) held in f32 in `rows` ([16][k]) into block b of every tensor.
void quantize_block(const Packed& p, int64_t b, const float* rows, int64_t valid, std::atomic<bool>& bad) {
  const QuantizedWeight& w = p.w;
  const int64_t k = w.k, kp = w.k_pad, groups = w.groups();
  switch (w.format) {
    case WeightFormat::kInt8: {
      int8_t* qb = reinterpret_cast<int8_t*>(p.qweight) + b * kp * kBlockRows;
      std::memset(qb, 0, static_cast<size_t>(kp * kBlockRows));
      auto* scales = reinterpret_cast<float*>(p.scales);
      for (int64_t r = 0; r < kBlockRows; ++r) {
        const int64_t n = b * kBlockRows + r;
        float amax = 0.0f;
        for (int64_t i = 0; r < valid && i < k; ++i) amax = std::max(amax, std::fabs(rows[r * k + i]));
        const float scale = amax / 127.0f;
        int32_t sum = 0;
        for (int64_t i = 0; r < valid && scale > 0.0f && i < k; ++i) {
          const int8_t qv =
              static_cast<int8_t>(std::clamp(std::nearbyint(rows[r * k + i] / scale), -127.0f, 127.0f));
          qb[layout::int8_offset(kp, r, i)] = qv;
          sum += qv;
        }
        scales[n] = scale;
        p.row_sums[n] = sum;
      }
      return;
    }
    case WeightFormat::kW4A8: {
      uint8_t* qb = p.qweight + b * kp * kBlockRows / 2;
      auto* scales = reinterpret_cast<uint16_t*>(p.scales);
      uint8_t q[kGroupSize];
      for (int64_t r = 0; r < kBlockRows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t k0 = g * kGroupSize;
          const int len = static_cast<int>(r < valid ? std::clamp<int64_t>(k - k0, 0, kGroupSize) : 0);
          std::fill(q, q + kGroupSize, uint8_t{8});  // padding columns hold zero weights
          GroupResult gr = len > 0 ? w4a8_group(rows + r * k + k0, len, q) : GroupResult{};
          if (gr.bad) bad = true;
          scales[layout::w4a8_scale_index(groups, b * kBlockRows + r, g)] = gr.scale;
          for (int64_t i = 0; i < kGroupSize; ++i) {
            bool high = false;
            const size_t off = layout::w4a8_offset(kp, r, k0 + i, &high);
            qb[off] = high ? static_cast<uint8_t>((qb[off] & 0x0f) | (q[i] << 4))
                           : static_cast<uint8_t>((qb[off] & 0xf0) | q[i]);
          }
        }
      }
      return;
    }
    case WeightFormat::kW4A16: {
      uint8_t* qb = p.qweight + b * kp * kBlockRows / 2;
      auto* params = reinterpret_cast<uint16_t*>(p.scales);
      uint8_t q[kGroupSize];
      for (int64_t r = 0; r < kBlockRows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t k0 = g * kGroupSize;
          const int len = static_cast<int>(r < valid ? std::clamp<int64_t>(k - k0, 0, kGroupSize) : 0);
          std::fill(q, q + kGroupSize, uint8_t{0});
          GroupResult gr = len > 0 ? w4a16_group(rows + r * k + k0, len, q) : GroupResult{};
          if (gr.bad) bad = true;
          params[layout::w4a16_param_index(groups, b * kBlockRows + r, g, 0)] = gr.scale;
          params[layout::w4a16_param_index(groups, b * kBlockRows + r, g, 1)] = gr.min;
          for (int64_t i = 0; i < kGroupSize; ++i) {
            bool high = false;
            const size_t off = layout::w4a16_offset(kp, r, k0 + i, &high);
            qb[off] = high ? static_cast<uint8_t>((qb[off] & 0x0f) | (q[i] << 4))
                           : static_cast<uint8_t>((qb[off] & 0xf0) | q[i]);
          }
        }
      }
      return;
    }
    default:
      return;
  }
}

QuantizedWeight convert_float(const FloatWeight& src, WeightFormat format, ThreadPool& pool) {
  Packed p = allocate_packed(format, src.n, src.k);
  pool.parallel_for(static_cast<size_t>(src.n), 16, [&](size_t begin, size_t end) {
    std::vector<float> row(static_cast<size_t>(src.k));
    for (size_t n = begin; n < end; ++n) {
      float_weight_to_f32(src, static_cast<int64_t>(n) * src.k, src.k, row.data());
      const size_t base = n * static_cast<size_t>(src.k);
      for (int64_t i = 0; i < src.k; ++i) {
        if (format == WeightFormat::kF32) {
          reinterpret_cast<float*>(p.qweight)[base + i] = row[i];
        } else {
          reinterpret_cast<uint16_t*>(p.qweight)[base + i] =
              format == WeightFormat::kBF16 ? f32_to_bf16(row[i]) : f32_to_f16(row[i]);
        }
      }
    }
  });
  return p.w;
}

}  // namespace

QuantizedWeight quantize_weight(const FloatWeight& src, WeightFormat format, ThreadPool& pool) {
  if (src.n <= 0 || src.k <= 0 || src.data == nullptr) {
    throw Error("quantize_weight: empty weight [" + std::to_string(src.n) + ", " + std::to_string(src.k) +
                "]");
  }
  if (is_float_format(format)) {
    QuantizedWeight view = float_weight_view(src);
    return view.format == format ? view : convert_float(src, format, pool);
  }
  Packed p = allocate_packed(format, src.n, src.k);
  std::atomic<bool> bad{false};
  std::atomic<bool> non_finite{false};
  const int64_t n_blocks = p.w.n_pad / kBlockRows;
  pool.run(static_cast<size_t>(n_blocks), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task);
    const int64_t valid = std::min(kBlockRows, src.n - b * kBlockRows);
    thread_local std::vector<float> rows;
    rows.resize(static_cast<size_t>(kBlockRows * src.k));
    float_weight_to_f32(src, b * kBlockRows * src.k, valid * src.k, rows.data());
    for (int64_t i = 0; i < valid * src.k; ++i) {
      if (!std::isfinite(rows[static_cast<size_t>(i)])) {
        non_finite = true;
        return;
      }
    }
    quantize_block(p, b, rows.data(), valid, bad);
  });
  if (non_finite) throw Error("quantize_weight: the weight holds a NaN or infinite value");
  if (bad)
    throw Error(std::string("quantize_weight: a group's scale overflows f16 (") + weight_format_name(format) +
                ")");
  return p.w;
}

}  // namespace spark::kernels
