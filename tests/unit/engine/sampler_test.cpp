#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace spark {

namespace {

std::vector<float> logits_of(std::initializer_list<float> v) {
  return std::vector<float>(v);
}

std::map<int32_t, int> histogram(const SamplingParams& p, const std::vector<float>& logits, int draws,
                                 uint64_t seed) {
  Sampler s(p, {}, seed);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) {
    auto l = logits;
    ++h[s.sample(l, nullptr).token];
  }
  return h;
}

// The support as a full sort finds it: every finite logit sorted most likely first, then top-k, min-p and
// top-p cut the sorted list (the sampler before it stopped sorting the vocabulary).
std::set<int32_t> support_by_full_sort(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<std::pair<float, int32_t>> c;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == -std::numeric_limits<float>::infinity()) continue;
    c.emplace_back(logits[i] / p.temperature, static_cast<int32_t>(i));
    max_logit = std::max(max_logit, logits[i] / p.temperature);
  }
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(static_cast<size_t>(p.top_k));
  std::vector<double> w;
  double total = 0.0;
  for (auto& [l, id] : c) {
    w.push_back(std::exp(static_cast<double>(l - max_logit)));
    total += w.back();
  }
  size_t n = c.size();
  if (p.min_p > 0.0f) {
    while (n > 1 && w[n - 1] < p.min_p * w[0]) --n;
  }
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cum += w[i] / total;
      if (cum >= p.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  std::set<int32_t> out;
  for (size_t i = 0; i < n; ++i) out.insert(c[i].second);
  return out;
}

}  // namespace

TEST(Sampler, CandidatesMatchAFullSortOnLargeVocabularies) {
  // Flat (random-weight-like), peaked (trained-like), tied and nearly flat logits over a large vocabulary,
  // with forbidden tokens, under every cut: the partial selection must keep exactly the full sort's set. (32k
  // tokens: the threshold steps are relative to the best token, so a larger vocabulary exercises nothing
  // new.)
  std::mt19937 rng(7);
  const size_t vocab = 32768;
  int cases = 0;
  for (int shape = 0; shape < 4; ++shape) {
    std::vector<float> logits(vocab);
    // Shape 3 is nearly flat (random weights): the cut's weight bucket holds thousands of candidates.
    std::normal_distribution<float> normal(0.0f, shape == 0 ? 1.0f : shape == 3 ? 0.02f : 4.0f);
    for (auto& v : logits) v = shape == 2 ? std::round(normal(rng)) : normal(rng);
    if (shape == 1) {
      for (int i = 0; i < 40; ++i) logits[rng() % vocab] += 30.0f;  // a few clear favourites
    }
    for (int i = 0; i < 1000; ++i) logits[rng() % vocab] = -std::numeric_limits<float>::infinity();
    for (float temperature : {0.3f, 1.7f}) {
      for (float top_p : {1.0f, 0.5f, 0.9f, 0.95f, 0.999f, 0.999999f}) {
        for (int top_k : {0, 1, 4000}) {
          for (float min_p : {0.0f, 0.05f}) {
            SamplingParams p;
            p.temperature = temperature;
            p.top_p = top_p;
            p.top_k = top_k;
            p.min_p = min_p;
            SamplingSupport got;
            select_sampling_support(logits, p, got);
            std::set<int32_t> ids;
            size_t count = 0;
            double mass = 0.0;
            for (size_t i = 0; i < got.row.size(); ++i) {
              if (got.row[i] >= got.row_floor) {
                ids.insert(static_cast<int32_t>(i));
                mass += got.row[i];
                ++count;
              }
            }
            EXPECT_NEAR(mass, got.row_mass, 1e-9 * (1.0 + mass));
            for (const auto& c : got.listed) {
              ids.insert(c.id);
              ++count;
            }
            ASSERT_EQ(ids.size(), count) << "a token both in the row and listed";
            const auto want = support_by_full_sort(logits, p);
            // top-p adds the weights in another order than the sorted one (bucket by bucket on flat
            // logits), which may move a cut that lands within rounding of top_p by one token.
            const size_t diff = std::max(ids.size(), want.size()) - std::min(ids.size(), want.size());
            EXPECT_LE(diff, 1u) << "shape " << shape << " T " << temperature << " top_p " << top_p
                                << " top_k " << top_k << " min_p " << min_p;
            // Both are most-likely-first prefixes of one order: the smaller lies inside the larger.
            const auto& small = ids.size() <= want.size() ? ids : want;
            const auto& large = ids.size() <= want.size() ? want : ids;
            EXPECT_TRUE(std::includes(large.begin(), large.end(), small.begin(), small.end()))
                << "shape " << shape << " T " << temperature << " top_p " << top_p;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 2 * 6 * 3 * 2);
}

TEST(Sampler, MinPAloneKeepsTheTokensAtOrAboveTheFloor) {
  // min_p without top_p or top_k is a floor over the row's weights: each weight is exp(logit / T - max)
  // (libmvec's vector exp, within 4 ulp), a token is kept exactly when it is at or above min_p, the kept
  // mass is theirs, and nothing is listed. Tokens right at the floor may go either way by that rounding.
  std::mt19937 rng(11);
  std::vector<float> logits(32768);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : logits) v = normal(rng);
  for (int i = 0; i < 500; ++i) logits[rng() % logits.size()] = -std::numeric_limits<float>::infinity();
  for (float temperature : {0.3f, 1.0f, 1.7f}) {
    for (float min_p : {0.001f, 0.05f, 0.5f, 1.0f}) {
      SamplingParams p;
      p.temperature = temperature;
      p.min_p = min_p;
      const float inv_t = 1.0f / temperature;
      float max_logit = -std::numeric_limits<float>::infinity();
      for (float v : logits) {
        if (v > -std::numeric_limits<float>::infinity()) max_logit = std::max(max_logit, v * inv_t);
      }
      SamplingSupport support;
      select_sampling_support(logits, p, support);
      EXPECT_TRUE(support.listed.empty());
      ASSERT_EQ(support.row.size(), logits.size());
      EXPECT_EQ(support.row_floor, static_cast<double>(min_p));
      double kept_mass = 0.0;
      size_t kept = 0;
      for (size_t i = 0; i < logits.size(); ++i) {
        const double got = support.row[i];
        if (!(logits[i] > -std::numeric_limits<float>::infinity())) {
          EXPECT_EQ(got, 0.0);
          continue;
        }
        const float l = logits[i] * inv_t;
        const double want = std::exp(static_cast<double>(l - max_logit));
        EXPECT_NEAR(got, want, 1e-15 * want) << "T " << temperature << " token " << i;
        if (std::fabs(want - min_p) > 1e-12 * min_p) {
          EXPECT_EQ(got >= support.row_floor, want >= min_p) << "T " << temperature << " min_p " << min_p;
        }
        if (got >= support.row_floor) {
          kept_mass += got;
          ++kept;
        }
      }
      EXPECT_GE(kept, 1u);
      EXPECT_NEAR(support.row_mass, kept_mass, 1e-12 * kept_mass);
    }
  }
}

TEST(Sampler, RepetitionPenaltyTouchesOnlySeenTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  Sampler s(p, std::vector<int32_t>{3, 3, 1}, 1);
  auto l = logits_of({0.0f, 4.0f, 0.5f, 3.0f, -1.0f});
  // Seen: 1 (4 -> 2) and 3 (3 -> 1.5); unseen 2 stays 0.5: token 1 still wins, with its halved logit.
  EXPECT_EQ(s.sample(l, nullptr).token, 1);
  EXPECT_FLOAT_EQ(l[1], 2.0f);
  EXPECT_FLOAT_EQ(l[3], 1.5f);
  EXPECT_FLOAT_EQ(l[2], 0.5f);
  EXPECT_FLOAT_EQ(l[4], -1.0f);
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, {}, 1);
  auto l = logits_of({1, 5, 5, 2});
  EXPECT_EQ(s.sample(l, nullptr).token, 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  const auto logits = logits_of({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.0f});
  Sampler a(p, {}, 42), b(p, {}, 42), c(p, {}, 43);
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    auto la = logits, lb = logits, lc = logits;
    const int32_t ta = a.sample(la, nullptr).token;
    EXPECT_EQ(ta, b.sample(lb, nullptr).token);
    differ += ta != c.sample(lc, nullptr).token;
  }
  EXPECT_GT(differ, 20);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  SamplingParams p;
  const auto logits = logits_of({0.0f, std::log(2.0f), std::log(7.0f)});  // p = 0.1, 0.2, 0.7
  auto h = histogram(p, logits, 20000, 7);
  EXPECT_NEAR(h[0] / 20000.0, 0.1, 0.015);
  EXPECT_NEAR(h[1] / 20000.0, 0.2, 0.015);
  EXPECT_NEAR(h[2] / 20000.0, 0.7, 0.015);
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  const auto logits = logits_of({std::log(0.05f), std::log(0.15f), std::log(0.3f), std::log(0.5f)});
  SamplingParams k;
  k.top_k = 2;
  auto hk = histogram(k, logits, 4000, 1);
  EXPECT_EQ(hk.count(0) + hk.count(1), 0u);
  SamplingParams tp;
  tp.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  auto hp = histogram(tp, logits, 4000, 2);
  EXPECT_EQ(hp.count(0) + hp.count(1), 0u);
  EXPECT_GT(hp[2], 1000);
  SamplingParams mp;
  mp.min_p = 0.2f;  // keeps p >= 0.1
  auto hm = histogram(mp, logits, 4000, 3);
  EXPECT_EQ(hm.count(0), 0u);
  EXPECT_GT(hm[1], 100);
}

TEST(Sampler, LogitBiasAndPenaltiesShiftTheChoice) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias[0] = 10.0f;
  Sampler s(p, {}, 1);
  auto l = logits_of({0, 5, 1});
  EXPECT_EQ(s.sample(l, nullptr).token, 0);

  SamplingParams f;
  f.temperature = 0;
  f.frequency_penalty = 2.0f;
  Sampler sf(f, {}, 1);
  auto l1 = logits_of({3, 2.5f});
  EXPECT_EQ(sf.sample(l1, nullptr).token, 0);
  auto l2 = logits_of({3, 2.5f});
  EXPECT_EQ(sf.sample(l2, nullptr).token, 1);  // token 0 now pays 2.0

  SamplingParams r;
  r.temperature = 0;
  r.repetition_penalty = 2.0f;
  const int32_t prompt[] = {0};
  Sampler sr(r, prompt, 1);
  auto l3 = logits_of({3, 2});  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(sr.sample(l3, nullptr).token, 1);
}

TEST(Sampler, LogprobsComeFromTheRawDistribution) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  p.logit_bias[0] = 100.0f;
  Sampler s(p, {}, 1);
  auto l = logits_of({0.0f, std::log(3.0f)});
  TokenEvent ev = s.sample(l, nullptr);
  EXPECT_EQ(ev.token, 0);
  EXPECT_NEAR(ev.logprob, std::log(0.25), 1e-6);
  ASSERT_EQ(ev.top_logprobs.size(), 2u);
  EXPECT_EQ(ev.top_logprobs[0].first, 1);
  EXPECT_NEAR(ev.top_logprobs[0].second, std::log(0.75), 1e-6);
}

TEST(Sampler, DrawsOnALargeRowFollowTheSoftmax) {
  // Three tokens hold the mass of a 32k row (the rest at e^-40): temperature alone draws through the
  // row's weights block by block (kernels::pick_weight), top-p through its floor and listed cut bucket.
  std::vector<float> logits(32768, -40.0f);
  logits[500] = 0.0f;              // p = 0.1
  logits[17000] = std::log(2.0f);  // p = 0.2
  logits[32700] = std::log(7.0f);  // p = 0.7
  logits[9] = -std::numeric_limits<float>::infinity();
  SamplingParams t;
  auto h = histogram(t, logits, 4000, 5);
  EXPECT_EQ(h[500] + h[17000] + h[32700], 4000);
  EXPECT_NEAR(h[500] / 4000.0, 0.1, 0.03);
  EXPECT_NEAR(h[17000] / 4000.0, 0.2, 0.03);
  SamplingParams tp;
  tp.top_p = 0.75f;  // 0.7 alone falls short: 0.7 and 0.2 are kept
  auto hp = histogram(tp, logits, 4000, 6);
  EXPECT_EQ(hp[17000] + hp[32700], 4000);
  EXPECT_NEAR(hp[17000] / 4000.0, 0.2 / 0.9, 0.03);
}

TEST(Sampler, LogprobsOfALargeRowMatchADoubleReference) {
  // Nothing adjusts the row, so logprobs are read from it in place; ties at the top go to the lowest id.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(32768);
  for (auto& v : logits) v = normal(rng);
  logits[100] = logits[20000] = logits[30000] = 12.0f;
  logits[7] = 11.5f;
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 5;
  Sampler s(p, {}, 1);
  auto l = logits;
  const TokenEvent ev = s.sample(l, nullptr);
  EXPECT_EQ(l, logits);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - 12.0);
  const double log_z = 12.0 + std::log(sum);
  EXPECT_EQ(ev.token, 100);
  EXPECT_NEAR(ev.logprob, 12.0 - log_z, 2e-6);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ASSERT_EQ(ev.top_logprobs.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ev.top_logprobs[i].first, order[i]);
    EXPECT_NEAR(ev.top_logprobs[i].second, logits[static_cast<size_t>(order[i])] - log_z, 2e-6);
  }
}

namespace {
class ForceToken : public LogitsProcessor {
 public:
  void process(std::span<float> logits) override {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (i != 2) logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  void accept(int32_t token) override { accepted = token; }
  int32_t accepted = -1;
};
}  // namespace

TEST(Sampler, ProcessorConstrainsAndSeesTheChoice) {
  SamplingParams p;
  ForceToken f;
  Sampler s(p, {}, 9);
  for (int i = 0; i < 50; ++i) {
    auto l = logits_of({5, 4, -3, 1});
    EXPECT_EQ(s.sample(l, &f).token, 2);
  }
  EXPECT_EQ(f.accepted, 2);
}

}  // namespace spark
