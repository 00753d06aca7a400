#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

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

}  // namespace

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
