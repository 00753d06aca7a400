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

class Sampler {
 public:
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed);

  // Chooses the next token from raw logits (modified in place) and fills the event's logprobs.
  TokenEvent sample(std::span<float> logits, LogitsProcessor* processor);

 private:
  SamplingParams params_;
  SamplerRng rng_;
  std::unordered_map<int32_t, int> output_counts_;
  std::vector<uint8_t> seen_;  // tokens in prompt or output, for the repetition penalty
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace spark
