#include "gemm/activations.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "spark/error.h"

namespace spark::kernels {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

void quantize_row(const float* x, int64_t k, int64_t k_pad, int64_t groups, bool offset128, int8_t* q,
                  float* scale, int32_t* group_sums) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  const uint8_t bias = offset128 ? 0x80 : 0;
  for (int64_t i = 0; i < k; ++i) {
    // x · inv is within rounding of ±127; fmax/fmin (unlike std::clamp) also map a NaN from a non-finite
    // activation to a defined value instead of undefined behaviour in the int conversion.
    const float v = std::fmin(std::fmax(std::nearbyint(x[i] * inv), -127.0f), 127.0f);
    q[i] = static_cast<int8_t>(static_cast<uint8_t>(static_cast<int>(v)) ^ bias);
  }
  std::memset(q + k, bias, static_cast<size_t>(k_pad - k));
  for (int64_t g = 0; g < groups; ++g) {
    int32_t sum = 0;
    for (int64_t i = g * 128; i < std::min(k, (g + 1) * 128); ++i) {
      sum += static_cast<int8_t>(static_cast<uint8_t>(q[i]) ^ bias);
    }
    group_sums[g] = sum;
  }
}

}  // namespace

void* scratch(int slot, size_t bytes) {
  thread_local std::unique_ptr<void, FreeDeleter> buffers[kScratchSlots];
  thread_local size_t sizes[kScratchSlots] = {};
  if (slot < 0 || slot >= kScratchSlots) throw Error("scratch: bad slot");
  if (sizes[slot] < bytes) {
    const size_t size = (bytes + 4095) / 4096 * 4096;
    buffers[slot].reset(std::aligned_alloc(64, size));
    if (!buffers[slot]) throw Error("scratch: out of memory allocating " + std::to_string(size) + " bytes");
    sizes[slot] = size;
  }
  return buffers[slot].get();
}

QuantizedActivations quantize_activations(const float* x, int64_t m, int64_t k, int64_t k_pad, int64_t groups,
                                          bool offset128, ThreadPool* pool, int64_t rows_multiple,
                                          QuantizeRowFn row_fn) {
  if (row_fn == nullptr) row_fn = quantize_row;
  QuantizedActivations a;
  const int64_t m_alloc = (m + rows_multiple - 1) / rows_multiple * rows_multiple;
  a.m = m;
  a.k_pad = k_pad;
  a.groups = groups;
  const size_t q_bytes = static_cast<size_t>((m_alloc * k_pad + 63) / 64 * 64);
  const size_t s_bytes = static_cast<size_t>((m_alloc * 4 + 63) / 64 * 64);
  auto* base =
      static_cast<uint8_t*>(scratch(0, q_bytes + s_bytes + static_cast<size_t>(m_alloc * groups * 4)));
  a.q = reinterpret_cast<int8_t*>(base);
  a.scale = reinterpret_cast<float*>(base + q_bytes);
  a.group_sums = reinterpret_cast<int32_t*>(base + q_bytes + s_bytes);
  auto rows = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      row_fn(x + i * k, k, k_pad, groups, offset128, a.q + i * k_pad, a.scale + i, a.group_sums + i * groups);
    }
  };
  if (pool != nullptr && m > 8) {
    pool->parallel_for(static_cast<size_t>(m), 8, rows);
  } else {
    rows(0, static_cast<size_t>(m));
  }
  const size_t extra = static_cast<size_t>(m_alloc - m);
  std::memset(a.q + m * k_pad, offset128 ? 0x80 : 0, extra * static_cast<size_t>(k_pad));
  std::memset(a.scale + m, 0, extra * sizeof(float));
  std::memset(a.group_sums + m * groups, 0, extra * static_cast<size_t>(groups) * sizeof(int32_t));
  return a;
}

}  // namespace spark::kernels
