// What the benchmark tools share to summarize repeated timings.
#pragma once

#include <algorithm>
#include <vector>

namespace spark::bench {

// The upper median of v (v non-empty): a repetition that really ran, not an average of two.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace spark::bench
