#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "softmax/softmax.h"

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

// Most likely first; ties to the lowest id, so a kept set never depends on the input order.
constexpr auto most_likely_first = [](const SamplingCandidate& a, const SamplingCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

// The k most likely of x[i] * scale (forbidden and NaN left out), most likely first, into `out` (weights
// 0): one scan keeps the best k so far, and a token enters only above the current k-th, which after the
// first few hundred tokens of a row almost never happens (no candidate per token, no heap over the row).
// Ids arrive in increasing order, so an equal value never displaces a kept one.
void select_top(std::span<const float> x, float scale, size_t k, std::vector<SamplingCandidate>& out) {
  out.clear();
  if (k == 0) return;
  out.reserve(k + 1);
  auto insert = [&](float l, size_t id) {
    const SamplingCandidate c{l, static_cast<int32_t>(id), 0.0};
    out.insert(std::upper_bound(out.begin(), out.end(), c, most_likely_first), c);
  };
  constexpr float kForbidden = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  for (; i < x.size() && out.size() < k; ++i) {
    if (x[i] > kForbidden) insert(x[i] * scale, i);
  }
  if (out.size() < k) return;
  float last = out.back().logit;
  for (; i < x.size(); ++i) {
    const float l = x[i] * scale;
    if (l > last) {  // false for forbidden and NaN too
      insert(l, i);
      out.pop_back();
      last = out.back().logit;
    }
  }
}

// log-softmax of the raw logits, for logprobs: computed before any sampling adjustment, as OpenAI and
// vLLM report them (the model's own distribution).
void fill_logprobs(std::span<const float> raw, int32_t chosen, int top, TokenEvent& ev) {
  const float max_logit = kernels::scaled_max(raw.data(), raw.size(), 1.0f);
  const double sum = kernels::exp_sum(raw.data(), raw.size(), max_logit);
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  ev.logprob = raw[static_cast<size_t>(chosen)] - log_z;
  if (top <= 0) return;
  thread_local std::vector<SamplingCandidate> best;
  select_top(raw, 1.0f, std::min<size_t>(static_cast<size_t>(top), raw.size()), best);
  for (const auto& c : best) ev.top_logprobs.emplace_back(c.id, c.logit - log_z);
}

// Where top-p cuts, from the mass of every weight bucket (kernels::weight_bucket: every bucket is a run of
// the most-likely-first order): the bucket the cut falls in, and the mass before it. Only that bucket is
// ever sorted.
struct TopPCut {
  int bucket;     // the bucket the cut falls in: every bucket before it is kept whole
  double before;  // the mass of the buckets before it
};

TopPCut find_top_p_cut(const double* masses, double target) {
  TopPCut cut{0, 0.0};
  for (;; ++cut.bucket) {
    const double m = masses[cut.bucket];
    // An empty bucket never holds the cut (top_p <= 0 would otherwise keep nothing).
    if (cut.bucket == kernels::kWeightBuckets - 1 || (m > 0.0 && cut.before + m >= target)) break;
    cut.before += m;
  }
  return cut;
}

// Appends the most likely candidates of the cut's bucket until the kept mass reaches `target`. A nearly
// flat row (random weights, or a grammar mask's survivors) puts tens of thousands of candidates in one
// bucket, so a large bucket is first split by the next 8 bits of its weights' mantissa, below the 4 its key
// took (its weights share exponent and those 4 bits, so every sub-bucket is again a run of the order): the
// sub-buckets before the cut's are kept whole, and only the cut's goes on, down to a few to sort.
void take_from_cut_bucket(std::vector<SamplingCandidate>& bucket, const TopPCut& cut, double target,
                          std::vector<SamplingCandidate>& out) {
  constexpr size_t kFewToSort = 256;
  double cum = cut.before;
  // Buckets 0 (clamped: weights >= 2 - 1/16, none but rounding) and the last span many exponents.
  if (cut.bucket > 0 && cut.bucket < kernels::kWeightBuckets - 1) {
    for (int shift = 40; shift >= 0 && bucket.size() > kFewToSort; shift -= 8) {
      auto sub_key = [shift](double w) {
        return 255 - static_cast<int>((std::bit_cast<uint64_t>(w) >> shift) & 255);
      };
      double masses[256] = {};
      for (const auto& c : bucket) masses[sub_key(c.weight)] += c.weight;
      int sub = 0;
      for (; sub < 255 && !(masses[sub] > 0.0 && cum + masses[sub] >= target); ++sub) cum += masses[sub];
      size_t left = 0;
      for (const auto& c : bucket) {
        const int k = sub_key(c.weight);
        if (k < sub) out.push_back(c);
        if (k == sub) bucket[left++] = c;
      }
      bucket.resize(left);
    }
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
  out.insert(out.end(), bucket.begin(), bucket.begin() + static_cast<std::ptrdiff_t>(take));
}

// Keeps the shortest most-likely-first prefix of `out` holding `target` of the weight, in no particular
// order. One pass keeps the buckets before the cut's in place (branch-free: every candidate is copied, the
// write position moves only for the kept ones) and sets the cut's bucket aside.
void cut_top_p(std::vector<SamplingCandidate>& out, double target) {
  double masses[kernels::kWeightBuckets] = {};
  for (const auto& c : out) masses[kernels::weight_bucket(c.weight)] += c.weight;
  const TopPCut cut = find_top_p_cut(masses, target);
  thread_local std::vector<SamplingCandidate> bucket;
  bucket.clear();
  size_t kept = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const SamplingCandidate c = out[i];
    const int b = kernels::weight_bucket(c.weight);
    out[kept] = c;
    kept += b < cut.bucket ? 1 : 0;
    if (b == cut.bucket) bucket.push_back(c);
  }
  out.resize(kept);
  take_from_cut_bucket(bucket, cut, target, out);
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

void select_sampling_support(std::span<const float> logits, const SamplingParams& params,
                             SamplingSupport& out) {
  const size_t n = logits.size();
  out.row = {};
  out.row_floor = std::numeric_limits<double>::infinity();
  out.row_mass = 0.0;
  out.listed.clear();
  const float inv_t = 1.0f / params.temperature;
  constexpr float kForbidden = -std::numeric_limits<float>::infinity();
  const float max_logit = kernels::scaled_max(logits.data(), n, inv_t);
  if (!(max_logit > kForbidden)) return;  // every token forbidden
  if (params.top_k > 0) {
    // top-k keeps k candidates, and only their exps are computed (scalar: few). A small k is one scan;
    // a large one selects among every candidate.
    std::vector<SamplingCandidate>& c = out.listed;
    const auto k = static_cast<size_t>(params.top_k);
    if (k <= 256) {
      select_top(logits, inv_t, k, c);
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float v = logits[i];
        if (v > kForbidden) c.push_back({v * inv_t, static_cast<int32_t>(i), 0.0});
      }
      if (k < c.size()) {
        std::nth_element(c.begin(), c.begin() + params.top_k - 1, c.end(), most_likely_first);
        c.resize(k);
      }
    }
    double total = 0.0;
    for (auto& x : c) {
      x.weight = std::exp(static_cast<double>(x.logit - max_logit));
      total += x.weight;
    }
    if (params.min_p > 0.0f && c.size() > 1) {
      // The best candidate's weight is exp(0) = 1, so the floor is min_p itself; the best always stays.
      const double floor = std::min(static_cast<double>(params.min_p), 1.0);
      c.erase(
          std::remove_if(c.begin(), c.end(), [&](const SamplingCandidate& x) { return x.weight < floor; }),
          c.end());
    }
    if (params.top_p < 1.0f && c.size() > 1) cut_top_p(c, static_cast<double>(params.top_p) * total);
    return;
  }

  // Every token may be kept (temperature alone, top_p, min_p): every weight in one vector pass into
  // thread-local scratch (the compute pool samples many rows at once); what is kept is a floor over them,
  // and top-p's cut bucket is listed. Nothing of the row is copied.
  thread_local std::vector<double> weights;
  weights.resize(n);
  const double* w = weights.data();
  out.row = std::span<const double>(weights.data(), n);
  // The best candidate's weight is exp(0) = 1, so min_p's floor is min_p itself; the best always stays.
  // Without it, the floor is the least positive weight: forbidden tokens (and weights that underflowed)
  // are 0 and can never be drawn.
  const double floor = params.min_p > 0.0f ? std::min(static_cast<double>(params.min_p), 1.0)
                                           : std::numeric_limits<double>::denorm_min();
  if (params.top_p >= 1.0f) {  // the kept mass comes with the weights
    out.row_floor = floor;
    out.row_mass = kernels::exp_weights(logits.data(), n, inv_t, max_logit, floor, weights.data());
    return;
  }
  // top_p's target counts every weight, min_p's cut ones too (it applies after min_p).
  const double total = kernels::exp_weights(logits.data(), n, inv_t, max_logit, 0.0, weights.data());
  const double target = static_cast<double>(params.top_p) * total;
  double masses[kernels::kWeightBuckets] = {};
  kernels::weight_bucket_masses(w, n, floor, masses);
  const TopPCut cut = find_top_p_cut(masses, target);
  // The buckets before the cut's hold exactly the weights at or above the least weight of the bucket just
  // before it; the cut's own bucket is the weights from its least up to that.
  const double upper =
      cut.bucket > 0 ? kernels::weight_bucket_least(cut.bucket - 1) : std::numeric_limits<double>::infinity();
  const double lower =
      cut.bucket < kernels::kWeightBuckets - 1 ? kernels::weight_bucket_least(cut.bucket) : 0.0;
  if (cut.bucket > 0) {
    out.row_floor = std::max(floor, upper);
    out.row_mass = cut.before;
  }
  thread_local std::vector<int32_t> ids;
  ids.resize(n);
  const size_t members = kernels::ids_in_range(w, n, std::max(floor, lower), upper, ids.data());
  thread_local std::vector<SamplingCandidate> bucket;
  bucket.clear();
  for (size_t j = 0; j < members; ++j) {
    const auto i = static_cast<size_t>(ids[j]);
    bucket.push_back({logits[i] * inv_t, ids[j], w[i]});
  }
  take_from_cut_bucket(bucket, cut, target, out.listed);
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
  // logprobs report the raw distribution: keep a copy only when something below changes the row.
  const bool adjusts = !params_.logit_bias.empty() || params_.repetition_penalty != 1.0f ||
                       params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
                       processor != nullptr;
  std::vector<float> raw;
  if (params_.logprobs >= 0 && adjusts) raw.assign(logits.begin(), logits.end());

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
    chosen = static_cast<int32_t>(kernels::argmax(logits.data(), logits.size()));
  } else {
    select_sampling_support(logits, params_, support_);
    if (support_.empty()) throw std::runtime_error("every token was forbidden");
    double listed_mass = 0.0;
    for (const auto& c : support_.listed) listed_mass += c.weight;
    double r = rng_.uniform() * (support_.row_mass + listed_mass);
    if (r < support_.row_mass || support_.listed.empty()) {
      chosen = static_cast<int32_t>(
          kernels::pick_weight(support_.row.data(), support_.row.size(), support_.row_floor, r));
    } else {
      r -= support_.row_mass;
      chosen = support_.listed.back().id;
      for (const auto& c : support_.listed) {
        r -= c.weight;
        if (r < 0) {
          chosen = c.id;
          break;
        }
      }
    }
  }

  TokenEvent ev;
  ev.token = chosen;
  if (params_.logprobs >= 0) {
    fill_logprobs(adjusts ? std::span<const float>(raw) : std::span<const float>(logits), chosen,
                  params_.logprobs, ev);
  }
  ++output_counts_[chosen];
  if (params_.repetition_penalty != 1.0f) mark_seen(chosen);
  if (processor != nullptr) processor->accept(chosen);
  return ev;
}

}  // namespace spark
