#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "activation/activation.h"
#include "activation/activation_isa.h"
#include "cpu/cpu_features.h"

namespace spark::kernels {

namespace {

using GegluFn = void (*)(const float*, const float*, float*, size_t);

// The activation in double precision with the true erf: what every body is measured against.
double exact_geglu(float g, float u) {
  const double gd = g;
  return 0.5 * gd * (1.0 + std::erf(gd / std::sqrt(2.0))) * static_cast<double>(u);
}

// Largest error of fn over gates swept densely across [-9, 9] (erf is +-1 in float beyond) plus random
// rows of every length up to 40 (the vector tails), in units of |gate * up|: the error of erf itself
// scaled by the half gate, which bounds what the products add (a few float roundings of the result).
double worst_error(GegluFn fn) {
  double worst = 0.0;
  auto measure = [&](const std::vector<float>& g, const std::vector<float>& u) {
    std::vector<float> out(g.size());
    fn(g.data(), u.data(), out.data(), g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const double want = exact_geglu(g[i], u[i]);
      const double scale = std::fabs(static_cast<double>(g[i]) * u[i]);
      if (scale == 0.0) {
        EXPECT_EQ(out[i], 0.0f) << "gate " << g[i] << " up " << u[i];
        continue;
      }
      worst = std::max(worst, std::fabs(out[i] - want) / scale);
    }
  };
  std::vector<float> g, u;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> up(-4.0f, 4.0f);
  for (float x = -9.0f; x <= 9.0f; x += 1.0f / 4096) {
    g.push_back(x);
    u.push_back(up(rng));
  }
  measure(g, u);
  std::normal_distribution<float> gate(0.0f, 2.0f);
  for (size_t n = 0; n <= 40; ++n) {
    g.resize(n);
    u.resize(n);
    for (size_t i = 0; i < n; ++i) {
      g[i] = gate(rng);
      u[i] = up(rng);
    }
    measure(g, u);
  }
  return worst;
}

}  // namespace

// erf's own error: glibc's scalar erff is within 1 ulp, libmvec's vector erff within 4 ulp; an ulp of erf
// is at most 6e-8 (values near 1), so the activation is within 1.3e-7 |gate * up| plus the roundings of
// three float products. A wrong branch, a lost tail lane or the tanh approximation is off by 1e-4 or more.
constexpr double kBound = 3e-7;

TEST(Geglu, ReferenceIsTheExactErfActivation) {
  const double worst = worst_error(geglu_ref);
  std::printf("geglu_ref: worst error %.3g |gate * up|\n", worst);
  EXPECT_LT(worst, kBound);
}

TEST(Geglu, Avx2MatchesTheExactActivation) {
  if (!cpu_supports(Isa::kAvx2)) GTEST_SKIP() << "this CPU has no " << isa_requirements(Isa::kAvx2);
  const double worst = worst_error(geglu_avx2);
  std::printf("geglu_avx2: worst error %.3g |gate * up|\n", worst);
  EXPECT_LT(worst, kBound);
}

TEST(Geglu, Avx512MatchesTheExactActivation) {
  if (!cpu_supports(Isa::kAvx512)) GTEST_SKIP() << "this CPU has no " << isa_requirements(Isa::kAvx512);
  const double worst = worst_error(geglu_avx512);
  std::printf("geglu_avx512: worst error %.3g |gate * up|\n", worst);
  EXPECT_LT(worst, kBound);
}

TEST(Geglu, DispatchWorksInPlace) {
  std::vector<float> g = {-3.0f, -0.5f, 0.0f, 0.25f, 1.0f,  2.5f, 7.0f,  -12.0f, 0.1f,
                          3.3f,  -1.5f, 4.0f, 0.7f,  -2.2f, 5.5f, 0.01f, -0.3f};
  std::vector<float> u(g.size(), 1.5f), want(g.size());
  geglu_ref(g.data(), u.data(), want.data(), g.size());
  geglu(g.data(), u.data(), g.data(), g.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-6 * (1.0 + std::fabs(want[i]))) << i;
}

}  // namespace spark::kernels
