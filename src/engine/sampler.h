// Turns one row of logits into the next token under a request's SamplingParams: logit bias, penalties,
// the request's logits processor, then greedy or temperature / top-k / top-p / min-p sampling from a
// per-request random stream (so a seeded request is reproducible whatever else is in the batch).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "spark/engine.h"

namespace spark {

// xoshiro256** seeded through splitmix64: small, fast, and the same sequence on every platform.
class SamplerRng {
 public:
  explicit SamplerRng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

// A token temperature sampling may choose, with its weight exp(logit / T - max): unnormalized.
struct SamplingCandidate {
  float logit;  // already divided by the temperature
  int32_t id;
  double weight;
};

// The tokens sampling with `params` may choose (top-k, then min-p, then top-p applied to the finite logits),
// in no particular order. The vocabulary is not sorted (a full sort of 131,072 logits per sequence per
// token was the cost of sampling): top-k selects; top-p sorts a peaked row's few leading candidates (up to
// 4,096), and on a flat row only the candidates in the weight bucket of its cut (1/16 of a binary octave
// wide: all of them when every weight falls in one bucket, e.g. equal logits after a grammar mask). The set
// is the one a full sort gives (up to one token where the cut lands within rounding of top_p).
// `params.temperature` must be > 0.
void select_sampling_candidates(std::span<const float> logits, const SamplingParams& params,
                                std::vector<SamplingCandidate>& out);

class Sampler {
 public:
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed);

  // Chooses the next token from raw logits (modified in place) and fills the event's logprobs.
  TokenEvent sample(std::span<float> logits, LogitsProcessor* processor);

 private:
  void mark_seen(int32_t token);

  SamplingParams params_;
  SamplerRng rng_;
  std::unordered_map<int32_t, int> output_counts_;
  // Tokens in prompt or output, for the repetition penalty: a membership map and the list, so applying
  // the penalty costs the number of distinct tokens seen, not the vocabulary.
  std::vector<uint8_t> seen_;
  std::vector<int32_t> seen_ids_;
  std::vector<SamplingCandidate> candidates_;
};

}  // namespace spark
