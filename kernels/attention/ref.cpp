#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention/attention.h"
#include "spark/error.h"
#include "util/fp8.h"
#include "util/half.h"

namespace spark::kernels {

void attention_ref(const AttentionShape& shape, const AttentionTask& task) {
  const int hd = shape.head_dim;
  const int group = shape.num_heads / shape.num_kv_heads;
  std::vector<double> scores, acc(static_cast<size_t>(hd));
  // Element i of a K or V row, widened from bf16 or fp8 when the cache stores that.
  const KvDtype dt = task.kv_dtype;
  const auto at = [dt](const void* row, int64_t i) -> double {
    if (dt == KvDtype::kBf16) return bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
    if (dt == KvDtype::kFp8) return kFp8E4M3Values[static_cast<const uint8_t*>(row)[i]];
    return static_cast<const float*>(row)[i];
  };
  const int64_t esize = kv_element_bytes(dt);
  for (int64_t r = 0; r < task.rows; ++r) {
    const int64_t pos = task.first_pos + r;
    const int64_t lo = task.window > 0 ? std::max<int64_t>(0, pos - task.window + 1) : 0;
    for (int h = 0; h < shape.num_heads; ++h) {
      const float* q = task.q + r * task.q_stride + static_cast<int64_t>(h) * hd;
      scores.assign(static_cast<size_t>(pos - lo + 1), 0.0);
      std::fill(acc.begin(), acc.end(), 0.0);
      double max_score = -std::numeric_limits<double>::infinity();
      // Pass 1: scores; pass 2: exp and the weighted sum of values.
      for (int pass = 0; pass < 2; ++pass) {
        int64_t seen = 0;
        for (const KvSpan& s : task.kv) {
          const int64_t kv_off = static_cast<int64_t>(h / group) * (s.head_stride != 0 ? s.head_stride : hd);
          for (int64_t i = 0; i < s.count; ++i) {
            const int64_t kp = s.pos + i;
            if (kp < lo || kp > pos) continue;
            double& sc = scores[static_cast<size_t>(kp - lo)];
            if (pass == 0) {
              const void* k = static_cast<const char*>(s.k) + (i * s.stride + kv_off) * esize;
              double d = 0.0;
              for (int j = 0; j < hd; ++j) d += static_cast<double>(q[j]) * at(k, j);
              sc = d * shape.scale;
              max_score = std::max(max_score, sc);
            } else {
              const void* v = static_cast<const char*>(s.v) + (i * s.stride + kv_off) * esize;
              sc = std::exp(sc - max_score);
              for (int j = 0; j < hd; ++j) acc[static_cast<size_t>(j)] += sc * at(v, j);
            }
            ++seen;
          }
        }
        if (seen != pos - lo + 1) throw Error("attention: the key spans do not cover the window of a row");
      }
      double sum = 0.0;
      for (double s : scores) sum += s;
      float* out = task.out + r * task.out_stride + static_cast<int64_t>(h) * hd;
      for (int j = 0; j < hd; ++j) out[j] = static_cast<float>(acc[static_cast<size_t>(j)] / sum);
    }
  }
}

}  // namespace spark::kernels
