#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/cpu_features.h"
#include "softmax/softmax.h"
#include "softmax/softmax_isa.h"

namespace spark::kernels {

namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();

struct Bodies {
  const char* name;
  Isa isa;
  size_t (*argmax)(const float*, size_t);
  float (*scaled_max)(const float*, size_t, float);
  double (*exp_weights)(const float*, size_t, float, float, double, double*);
  double (*exp_sum)(const float*, size_t, float);
  void (*bucket_masses)(const double*, size_t, double, double*);
  size_t (*ids_in_range)(const double*, size_t, double, double, int32_t*);
  size_t (*pick_weight)(const double*, size_t, double, double);
};

void PrintTo(const Bodies& b, std::ostream* os) {
  *os << b.name;
}

const Bodies kBodies[] = {
    {"ref", Isa::kScalar, argmax_ref, scaled_max_ref, exp_weights_ref, exp_sum_ref, weight_bucket_masses_ref,
     ids_in_range_ref, pick_weight_ref},
    {"avx2", Isa::kAvx2, argmax_avx2, scaled_max_avx2, exp_weights_avx2, exp_sum_avx2,
     weight_bucket_masses_avx2, ids_in_range_avx2, pick_weight_avx2},
    {"avx512", Isa::kAvx512, argmax_avx512, scaled_max_avx512, exp_weights_avx512, exp_sum_avx512,
     weight_bucket_masses_avx512, ids_in_range_avx512, pick_weight_avx512},
};

// Rows of every length up to 70 (the vector tails) and one of a real vocabulary, with forbidden (-inf) and
// NaN entries, and a row whose logits span thousands.
std::vector<std::vector<float>> rows() {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> out;
  for (size_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 70, 131072}) {
    std::vector<float> r(n);
    for (auto& v : r) v = normal(rng);
    for (size_t i = 0; i < n; i += 5) r[i] = kNone;
    if (n > 2) r[n - 2] = std::numeric_limits<float>::quiet_NaN();
    out.push_back(std::move(r));
  }
  // A wide row: most exp arguments fall under kLeastExpfArgument and some under kLeastExpArgument.
  std::normal_distribution<float> wide(0.0f, 400.0f);
  std::vector<float> r(4099);
  for (auto& v : r) v = wide(rng);
  out.push_back(std::move(r));
  return out;
}

class SoftmaxKernels : public ::testing::TestWithParam<Bodies> {
 protected:
  void SetUp() override {
    if (!cpu_supports(GetParam().isa)) GTEST_SKIP() << "this CPU has no " << isa_requirements(GetParam().isa);
  }
};

}  // namespace

TEST_P(SoftmaxKernels, ArgmaxIsTheFirstLargest) {
  for (auto r : rows()) {
    // Ties at the top, placed late and early; then with every value forbidden.
    if (r.size() > 8) r[r.size() - 3] = r[5] = 1e6f;
    size_t want = 0;  // the first largest allowed value
    bool any = false;
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i] > kNone && (!any || r[i] > r[want])) {
        want = i;
        any = true;
      }
    }
    EXPECT_EQ(GetParam().argmax(r.data(), r.size()), want) << "n " << r.size();
    std::fill(r.begin(), r.end(), kNone);
    EXPECT_EQ(GetParam().argmax(r.data(), r.size()), 0u);
  }
}

TEST_P(SoftmaxKernels, ScaledMaxIsTheMaximumOfTheAllowed) {
  for (const auto& r : rows()) {
    for (float scale : {1.0f, 1.0f / 0.7f, 2.5f}) {
      float want = kNone;
      for (float v : r) {
        if (v > kNone) want = std::max(want, v * scale);
      }
      EXPECT_EQ(GetParam().scaled_max(r.data(), r.size(), scale), want) << "n " << r.size();
    }
  }
}

TEST_P(SoftmaxKernels, ExpWeightsAreTheDoubleExpOfTheRoundedLogit) {
  // libmvec's exp is within 4 ulp of the true exp; a fused multiply-subtract, a lost tail lane or a float
  // exp is off by 1e-8 or more.
  for (const auto& r : rows()) {
    const float scale = 1.0f / 0.7f;
    const float shift = scaled_max_ref(r.data(), r.size(), scale);
    std::vector<double> w(r.size() + 1, -1.0);
    const double sum = GetParam().exp_weights(r.data(), r.size(), scale, shift, 0.0, w.data());
    const double floor = 0.01;  // min_p's kept mass: the weights at or above it
    double want_sum = 0.0, want_kept = 0.0;
    for (size_t i = 0; i < r.size(); ++i) {
      if (!(r[i] > kNone)) {
        EXPECT_EQ(w[i], 0.0) << "forbidden or NaN at " << i;
        continue;
      }
      const float l = r[i] * scale;
      const float d = l - shift;
      const double want = d >= kLeastExpArgument ? std::exp(static_cast<double>(d)) : 0.0;
      want_sum += want;
      if (w[i] >= floor) want_kept += w[i];
      EXPECT_NEAR(w[i], want, 1e-15 * want) << "n " << r.size() << " at " << i;
    }
    EXPECT_EQ(w[r.size()], -1.0) << "written past the row";
    EXPECT_NEAR(sum, want_sum, 1e-12 * want_sum) << "n " << r.size();
    std::vector<double> w2(r.size());
    EXPECT_NEAR(GetParam().exp_weights(r.data(), r.size(), scale, shift, floor, w2.data()), want_kept,
                1e-12 * want_kept);
    EXPECT_EQ(w2, std::vector<double>(w.begin(), w.end() - 1)) << "the floor changes no weight";
  }
}

TEST_P(SoftmaxKernels, ExpSumIsTheSumOfFloatExps) {
  for (const auto& r : rows()) {
    const float shift = scaled_max_ref(r.data(), r.size(), 1.0f);
    double want = 0.0;
    for (float v : r) {
      if (v > kNone && v - shift >= kLeastExpfArgument) {
        want += std::exp(static_cast<double>(v) - static_cast<double>(shift));
      }
    }
    EXPECT_NEAR(GetParam().exp_sum(r.data(), r.size(), shift), want, 3e-7 * want) << "n " << r.size();
  }
}

TEST(SoftmaxKernels, WeightBucketsAreRunsOfTheOrderAndTheirLeastWeightsBoundThem) {
  for (int key = 0; key < kWeightBuckets - 1; ++key) {
    const double least = weight_bucket_least(key);
    EXPECT_EQ(weight_bucket(least), key);
    EXPECT_EQ(weight_bucket(std::nextafter(least, 0.0)), key + 1);
  }
  EXPECT_EQ(weight_bucket(1.0), 15);
  EXPECT_EQ(weight_bucket(0.0), kWeightBuckets - 1);
  double previous = 1.0;
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> d(-60.0, 0.0);
  std::vector<double> ws(10000);
  for (auto& w : ws) w = std::exp(d(rng));
  std::sort(ws.rbegin(), ws.rend());
  for (double w : ws) {
    EXPECT_GE(weight_bucket(w), weight_bucket(previous));
    previous = w;
  }
}

namespace {

std::vector<double> weight_row(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(-6.0, 3.0);
  std::vector<double> w(n);
  for (auto& x : w) x = std::min(1.0, std::exp(normal(rng)));
  for (size_t i = 0; i < n; i += 7) w[i] = 0.0;  // forbidden
  return w;
}

}  // namespace

TEST_P(SoftmaxKernels, BucketMassesAndRangesMatchTheScalarReference) {
  for (size_t n : {0, 1, 5, 8, 13, 64, 100, 131072}) {
    const auto w = weight_row(n, static_cast<uint32_t>(n));
    for (double floor : {std::numeric_limits<double>::denorm_min(), 0.01}) {
      std::vector<double> want(kWeightBuckets, 0.5), got(kWeightBuckets, 0.5);  // both add to what is there
      weight_bucket_masses_ref(w.data(), n, floor, want.data());
      GetParam().bucket_masses(w.data(), n, floor, got.data());
      for (int b = 0; b < kWeightBuckets; ++b)
        EXPECT_NEAR(got[b], want[b], 1e-12 * want[b]) << "bucket " << b;
    }
    for (int key : {15, 100, 140, 300}) {
      const double lo = weight_bucket_least(key), hi = weight_bucket_least(key - 1);
      std::vector<int32_t> want(n), got(n);
      want.resize(ids_in_range_ref(w.data(), n, lo, hi, want.data()));
      got.resize(GetParam().ids_in_range(w.data(), n, lo, hi, got.data()));
      EXPECT_EQ(got, want) << "n " << n << " bucket " << key;
    }
  }
}

TEST_P(SoftmaxKernels, PickWeightFindsWhereTheRunningSumPassesTheDraw) {
  for (size_t n : {1, 9, 64, 65, 200, 131072}) {
    const auto w = weight_row(n, 11 + static_cast<uint32_t>(n));
    for (double floor : {std::numeric_limits<double>::denorm_min(), 0.003}) {
      std::vector<double> before(n + 1, 0.0);  // kept mass before each token, summed in order
      size_t last = n;
      for (size_t i = 0; i < n; ++i) {
        const bool kept = w[i] >= floor;
        before[i + 1] = before[i] + (kept ? w[i] : 0.0);
        if (kept) last = i;
      }
      const double total = before[n];
      if (last == n) continue;  // nothing kept (n = 1: its one weight is forbidden)
      std::mt19937 rng(2);
      for (int k = 0; k < 200; ++k) {
        const double r = std::uniform_real_distribution<double>(0.0, total)(rng);
        const size_t i = GetParam().pick_weight(w.data(), n, floor, r);
        ASSERT_LT(i, n);
        EXPECT_GE(w[i], floor);
        // Block sums round differently from the running one: a draw may move within that rounding only.
        const double slack = 1e-12 * total;
        EXPECT_LE(before[i], r + slack) << "n " << n << " r " << r;
        EXPECT_GT(before[i + 1], r - slack) << "n " << n << " r " << r;
      }
      EXPECT_EQ(GetParam().pick_weight(w.data(), n, floor, total * 2.0), last);
    }
    const std::vector<double> none(n, 0.0);
    EXPECT_EQ(GetParam().pick_weight(none.data(), n, 0.5, 0.1), n);
  }
}

INSTANTIATE_TEST_SUITE_P(Bodies, SoftmaxKernels, ::testing::ValuesIn(kBodies),
                         [](const ::testing::TestParamInfo<Bodies>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace spark::kernels
