#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spark {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

// log-softmax of the raw logits, for logprobs: computed before any sampling adjustment, as OpenAI and
// vLLM report them (the model's own distribution).
void fill_logprobs(std::span<const float> raw, int32_t chosen, int top, TokenEvent& ev) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float v : raw) max_logit = std::max(max_logit, v);
  double sum = 0.0;
  for (float v : raw) sum += std::exp(static_cast<double>(v - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  ev.logprob = raw[static_cast<size_t>(chosen)] - log_z;
  if (top <= 0) return;
  std::vector<int32_t> idx(raw.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  const size_t k = std::min<size_t>(static_cast<size_t>(top), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](int32_t a, int32_t b) {
                      return raw[static_cast<size_t>(a)] > raw[static_cast<size_t>(b)] ||
                             (raw[static_cast<size_t>(a)] == raw[static_cast<size_t>(b)] && a < b);
                    });
  for (size_t i = 0; i < k; ++i)
    ev.top_logprobs.emplace_back(idx[i], raw[static_cast<size_t>(idx[i])] - log_z);
}

}  // namespace

SamplerRng::SamplerRng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t SamplerRng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SamplerRng::uniform() {
  return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
}

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed)
    : params_(params), rng_(seed) {
  if (params_.repetition_penalty != 1.0f) {
    for (int32_t t : prompt) {
      if (t >= 0) {
        if (static_cast<size_t>(t) >= seen_.size()) seen_.resize(static_cast<size_t>(t) + 1, 0);
        seen_[static_cast<size_t>(t)] = 1;
      }
    }
  }
}

TokenEvent Sampler::sample(std::span<float> logits, LogitsProcessor* processor) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  std::vector<float> raw;
  if (params_.logprobs >= 0) raw.assign(logits.begin(), logits.end());

  for (const auto& [tok, bias] : params_.logit_bias) {
    if (tok >= 0 && tok < vocab) logits[static_cast<size_t>(tok)] += bias;
  }
  if (params_.repetition_penalty != 1.0f) {
    const float rp = params_.repetition_penalty;
    for (size_t t = 0; t < seen_.size() && t < logits.size(); ++t) {
      if (seen_[t]) logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [tok, count] : output_counts_) {
      if (tok < vocab) {
        logits[static_cast<size_t>(tok)] -=
            params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
      }
    }
  }
  if (processor != nullptr) processor->process(logits);

  int32_t chosen = 0;
  if (params_.temperature <= 1e-5f) {
    // Greedy; ties go to the lowest id so results are comparable across engines.
    for (int32_t i = 1; i < vocab; ++i) {
      if (logits[static_cast<size_t>(i)] > logits[static_cast<size_t>(chosen)]) chosen = i;
    }
  } else {
    const float inv_t = 1.0f / params_.temperature;
    candidates_.clear();
    float max_logit = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < vocab; ++i) {
      const float v = logits[static_cast<size_t>(i)];
      if (v == -std::numeric_limits<float>::infinity()) continue;
      candidates_.emplace_back(v * inv_t, i);
      max_logit = std::max(max_logit, v * inv_t);
    }
    auto by_logit = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t keep = candidates_.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
      keep = static_cast<size_t>(params_.top_k);
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                        candidates_.end(), by_logit);
      candidates_.resize(keep);
    }
    // Probabilities relative to the best candidate; top-p and min-p need them sorted.
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
    std::vector<double> probs(candidates_.size());
    double total = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      probs[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit));
      total += probs[i];
    }
    size_t n = candidates_.size();
    if (params_.min_p > 0.0f) {
      const double floor = params_.min_p * probs[0];
      while (n > 1 && probs[n - 1] < floor) --n;
    }
    if (params_.top_p < 1.0f) {
      double cum = 0.0;
      size_t cut = n;
      for (size_t i = 0; i < n; ++i) {
        cum += probs[i] / total;
        if (cum >= params_.top_p) {
          cut = i + 1;
          break;
        }
      }
      n = cut;
    }
    double mass = 0.0;
    for (size_t i = 0; i < n; ++i) mass += probs[i];
    double r = rng_.uniform() * mass;
    chosen = candidates_[n - 1].second;
    for (size_t i = 0; i < n; ++i) {
      r -= probs[i];
      if (r < 0) {
        chosen = candidates_[i].second;
        break;
      }
    }
  }

  TokenEvent ev;
  ev.token = chosen;
  if (params_.logprobs >= 0) fill_logprobs(raw, chosen, params_.logprobs, ev);
  ++output_counts_[chosen];
  if (params_.repetition_penalty != 1.0f) {
    if (static_cast<size_t>(chosen) >= seen_.size()) seen_.resize(static_cast<size_t>(chosen) + 1, 0);
    seen_[static_cast<size_t>(chosen)] = 1;
  }
  if (processor != nullptr) processor->accept(chosen);
  return ev;
}

}  // namespace spark
