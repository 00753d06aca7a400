#include <algorithm>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_isa.h"
#include "cpu/cpu_features.h"
#include "spark/error.h"

namespace spark::kernels {

void attention(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool) {
  if (shape.num_kv_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0 || shape.head_dim <= 0) {
    throw Error("attention: heads must be a positive multiple of the KV heads");
  }
  if (tasks.empty()) return;
  if (active_isa() >= Isa::kAvx512 && attention_avx512_supports(shape.head_dim)) {
    attention_avx512(shape, tasks, pool);
    return;
  }
  if (active_isa() >= Isa::kAvx2 && attention_avx2_supports(shape.head_dim)) {
    attention_avx2(shape, tasks, pool);
    return;
  }
  // Scalar tier: the reference, on 16-row slices of each task so it still uses every thread.
  std::vector<AttentionTask> parts;
  for (const AttentionTask& t : tasks) {
    for (int64_t r = 0; r < t.rows; r += 16) {
      AttentionTask p = t;
      p.q = t.q + r * t.q_stride;
      p.out = t.out + r * t.out_stride;
      p.first_pos = t.first_pos + r;
      p.rows = std::min<int64_t>(16, t.rows - r);
      parts.push_back(p);
    }
  }
  pool.run(parts.size(), [&](size_t i) { attention_ref(shape, parts[i]); });
}

}  // namespace spark::kernels
