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

// The tokens temperature sampling may choose from one row (top-k, then min-p, then top-p applied to the
// finite logits): every token whose weight in `row` is at least `row_floor`, then the `listed` candidates.
// The vocabulary is never sorted (a full sort of 131,072 logits per sequence per token was the cost of
// sampling). Without top-k, every weight comes from one vector pass over the row, min-p is a floor over
// them, and top-p adds a floor at the weight bucket its cut falls in (1/16 of a binary octave, split further
// when it holds many): that bucket's candidates are sorted, and those top-p keeps are listed. With top-k,
// a heap selects the k candidates, all listed. The set is the one a full sort gives (up to one token where
// the cut lands within rounding of top_p).
struct SamplingSupport {
  std::span<const double> row;  // every token's weight by id (thread-local: valid until the next select)
  double row_floor = 0.0;       // > 0: forbidden tokens have weight 0
  double row_mass = 0.0;        // the sum of the row's weights at or above the floor
  std::vector<SamplingCandidate> listed;

  bool empty() const { return row_mass <= 0.0 && listed.empty(); }
};

// `params.temperature` must be > 0.
void select_sampling_support(std::span<const float> logits, const SamplingParams& params,
                             SamplingSupport& out);

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
  SamplingSupport support_;
};

}  // namespace spark
