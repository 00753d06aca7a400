#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

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

// top-p buckets: weights are exp(logit - max) in (0, 1]; 64 binary exponents below 1, 16 steps each. The last
// bucket holds everything under 2^-63 * 17/16 (sorted whole only if the cut falls among them).
constexpr int kTopPBuckets = 64 * 16;

inline int top_p_bucket(double weight) {
  const uint64_t bits = std::bit_cast<uint64_t>(weight);
  const int below_one = 1023 - static_cast<int>(bits >> 52);  // 0 for [1, 2), weights are positive
  const int key = below_one * 16 + 15 - static_cast<int>((bits >> 48) & 15);
  return std::clamp(key, 0, kTopPBuckets - 1);
}

// Most likely first; ties to the lowest id, so a kept set never depends on the input order.
constexpr auto most_likely_first = [](const SamplingCandidate& a, const SamplingCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

// Keeps the shortest most-likely-first prefix of `out` holding `target` of the weight, in no particular
// order. Nothing close to the whole set is ever sorted.
void cut_top_p(std::vector<SamplingCandidate>& out, double target) {
  // Peaked logits (a trained model's usual shape): the few candidates within e^-10 of the best hold the
  // mass; sort just those. A threshold splits the sorted order into a prefix, so the running sum over them
  // is exactly the full sort's.
  constexpr double kHigh = 4.5399929762484854e-05;  // e^-10
  constexpr size_t kFewToSort = 4096;
  double high_mass = 0.0;
  size_t high = 0;
  for (const auto& c : out) {
    const bool h = c.weight >= kHigh;
    high_mass += h ? c.weight : 0.0;
    high += h;
  }
  if (high <= kFewToSort && high_mass >= target) {
    const auto mid =
        std::partition(out.begin(), out.end(), [&](const SamplingCandidate& c) { return c.weight >= kHigh; });
    std::sort(out.begin(), mid, most_likely_first);
    double cum = 0.0;
    auto end = mid;
    for (auto it = out.begin(); it != mid; ++it) {
      cum += it->weight;
      if (cum >= target) {
        end = it + 1;
        break;
      }
    }
    out.erase(end, out.end());
    return;
  }
  // Flat logits (95% of the mass spread over most of a 131k vocabulary): one pass buckets the weights by
  // their binary exponent and top 4 mantissa bits (a key that never decreases as the weight falls, so
  // every bucket is a run of the sorted order), the bucket masses locate the bucket the cut falls in, and
  // only that bucket is sorted. Four partial sums per bucket, so that a run of candidates in one bucket
  // does not chain every add through one memory location.
  double lanes[4][kTopPBuckets] = {};
  for (size_t i = 0; i < out.size(); ++i) lanes[i & 3][top_p_bucket(out[i].weight)] += out[i].weight;
  double cum = 0.0;  // mass of the buckets before the cut's
  int cut_bucket = 0;
  for (;; ++cut_bucket) {
    const double m =
        (lanes[0][cut_bucket] + lanes[1][cut_bucket]) + (lanes[2][cut_bucket] + lanes[3][cut_bucket]);
    // An empty bucket never holds the cut (top_p <= 0 would otherwise keep nothing).
    if (cut_bucket == kTopPBuckets - 1 || (m > 0.0 && cum + m >= target)) break;
    cum += m;
  }
  // One pass keeps the buckets before the cut's in place (branch-free: every candidate is copied, the
  // write position moves only for the kept ones) and sets the cut's bucket aside.
  thread_local std::vector<SamplingCandidate> bucket;
  bucket.clear();
  size_t kept = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const SamplingCandidate c = out[i];
    const int b = top_p_bucket(c.weight);
    out[kept] = c;
    kept += b < cut_bucket ? 1 : 0;
    if (b == cut_bucket) bucket.push_back(c);
  }
  std::sort(bucket.begin(), bucket.end(), most_likely_first);
  size_t take = bucket.size();  // the whole set holds less than top_p (rounding): keep it all
  for (size_t i = 0; i < bucket.size(); ++i) {
    cum += bucket[i].weight;
    if (cum >= target) {
      take = i + 1;
      break;
    }
  }
  out.resize(kept);
  out.insert(out.end(), bucket.begin(), bucket.begin() + static_cast<std::ptrdiff_t>(take));
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

void select_sampling_candidates(std::span<const float> logits, const SamplingParams& params,
                                std::vector<SamplingCandidate>& out) {
  out.clear();
  const float inv_t = 1.0f / params.temperature;
  constexpr float kForbidden = -std::numeric_limits<float>::infinity();
  float max_logit = kForbidden;
  for (const float v : logits) {
    if (v > kForbidden) max_logit = std::max(max_logit, v * inv_t);  // skips forbidden (and NaN)
  }
  // min_p alone (no top_p, whose target counts the whole mass; no top_k, whose order the draw walks): a
  // candidate whose weight exp(logit - max) is surely under the floor (its exponent below log(min_p) by a
  // margin far beyond exp's rounding) never becomes one, saving its exp on most of a flat row; the exact
  // test below decides the rest, so the kept set and its order are the same.
  const double keep_from = params.min_p > 0.0f && params.top_p >= 1.0f && params.top_k <= 0
                               ? std::log(std::min(static_cast<double>(params.min_p), 1.0)) - 1e-6
                               : -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (!(v > kForbidden)) continue;  // forbidden (or NaN)
    const float l = v * inv_t;
    if (static_cast<double>(l - max_logit) < keep_from) continue;
    out.push_back({l, static_cast<int32_t>(i), 0.0});
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < out.size()) {
    const auto kth = out.begin() + params.top_k;
    // A heap of k beats quickselect's passes over the whole row while k is small.
    if (params.top_k <= 256) {
      std::partial_sort(out.begin(), kth, out.end(), most_likely_first);
    } else {
      std::nth_element(out.begin(), kth - 1, out.end(), most_likely_first);
    }
    out.resize(static_cast<size_t>(params.top_k));
  }
  double total = 0.0;
  for (auto& c : out) {
    c.weight = std::exp(static_cast<double>(c.logit - max_logit));
    total += c.weight;
  }
  if (params.min_p > 0.0f && out.size() > 1) {
    // The best candidate's weight is exp(0) = 1, so the floor is min_p itself; the best always stays.
    const double floor = std::min(static_cast<double>(params.min_p), 1.0);
    out.erase(
        std::remove_if(out.begin(), out.end(), [&](const SamplingCandidate& c) { return c.weight < floor; }),
        out.end());
  }
  if (params.top_p < 1.0f && out.size() > 1) cut_top_p(out, static_cast<double>(params.top_p) * total);
}

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt, uint64_t seed)
    : params_(params), rng_(seed) {
  if (params_.repetition_penalty != 1.0f) {
    for (int32_t t : prompt) mark_seen(t);
  }
}

void Sampler::mark_seen(int32_t token) {
  if (token < 0) return;
  const auto t = static_cast<size_t>(token);
  if (t >= seen_.size()) seen_.resize(t + 1, 0);
  if (seen_[t] == 0) {
    seen_[t] = 1;
    seen_ids_.push_back(token);
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
    for (int32_t t : seen_ids_) {
      if (t < vocab) {
        float& l = logits[static_cast<size_t>(t)];
        l = l > 0 ? l / rp : l * rp;
      }
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
    select_sampling_candidates(logits, params_, candidates_);
    if (candidates_.empty()) throw std::runtime_error("every token was forbidden");
    double mass = 0.0;
    for (const auto& c : candidates_) mass += c.weight;
    double r = rng_.uniform() * mass;
    chosen = candidates_.back().id;
    for (const auto& c : candidates_) {
      r -= c.weight;
      if (r < 0) {
        chosen = c.id;
        break;
      }
    }
  }

  TokenEvent ev;
  ev.token = chosen;
  if (params_.logprobs >= 0) fill_logprobs(raw, chosen, params_.logprobs, ev);
  ++output_counts_[chosen];
  if (params_.repetition_penalty != 1.0f) mark_seen(chosen);
  if (processor != nullptr) processor->accept(chosen);
  return ev;
}

}  // namespace spark
