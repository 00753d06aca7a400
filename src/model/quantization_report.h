// How far a quantized model is from its float source: the figures spark-quantize --report prints.
// Weight SNR per tensor says what rounding did to each matrix; logits SNR and greedy agreement say what
// it does to the model's output on a prompt longer than the sliding window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/spark_model.h"
#include "util/thread_pool.h"

namespace spark {

// 10·log10(Σ r² / Σ (r − t)²) in dB; +infinity when t equals r exactly.
double snr_db(const float* reference, const float* test, size_t n);

struct WeightFidelity {
  std::string name;  // tensor prefix, e.g. "model.layers.0.mlp.up_proj"
  int64_t n = 0, k = 0;
  double bits_per_weight = 0;
  double snr_db = 0;
};
// Each linear weight of `model` against the float tensor its (float) checkpoint stores.
std::vector<WeightFidelity> weight_fidelity(const SparkModel& model, ThreadPool& pool);

// What one model does with a prompt: every position's logits (teacher-forced), then a greedy
// continuation of `greedy_steps` tokens.
struct ModelProbe {
  std::vector<float> logits;  // [prompt tokens, vocab]
  std::vector<int32_t> greedy;
};
ModelProbe probe_model(SparkModel& model, const std::vector<int32_t>& prompt, int64_t greedy_steps,
                       ThreadPool& pool);

struct LogitsFidelity {
  int64_t positions = 0;
  double snr_db = 0;       // over all prompt positions' logits
  int64_t top1_agree = 0;  // prompt positions whose argmax equals the reference's
  int64_t greedy_steps = 0;
  int64_t greedy_identical = 0;  // greedy tokens before the first one that differs from the reference's
};
LogitsFidelity compare_probes(const ModelProbe& reference, const ModelProbe& test, int64_t vocab);

// The index of the largest value, the lowest index on ties (the sampler's greedy rule).
int64_t argmax(const float* v, int64_t n);

}  // namespace spark
