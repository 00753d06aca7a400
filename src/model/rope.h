// Rotary position tables for one layer type. Sized to max_model_len positions, never to the
// advertised 1M: at head_dim 256 a 1M-position table would cost ~1 GB.
#pragma once

#include <cstdint>
#include <vector>

#include "spark/model_config.h"

namespace spark {

class RopeTable {
 public:
  RopeTable(const RopeParams& params, int64_t max_positions);

  int rotary_dim() const { return rotary_dim_; }
  int64_t max_positions() const { return max_positions_; }
  int64_t bytes() const { return static_cast<int64_t>((cos_.size() + sin_.size()) * sizeof(float)); }

  // NeoX half-split rotation of the first rotary_dim dims of each of n_heads heads (head stride
  // head_dim) at position pos: (a, b) = (x[i], x[i + rd/2]) -> (a cos - b sin, b cos + a sin).
  void apply(float* x, int n_heads, int head_dim, int64_t pos) const;

 private:
  int rotary_dim_;
  int64_t max_positions_;
  std::vector<float> cos_;  // [pos][rotary_dim / 2]
  std::vector<float> sin_;
};

}  // namespace spark
