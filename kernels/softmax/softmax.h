// The row passes of sampling from logits, as a kernel family: greedy's argmax, the scaled maximum, every
// weight exp(x * scale - shift) with their sum, top-p's weight buckets, and the token a draw picks among the
// weights over a floor. Sampling and logprobs run them over a whole 131,072-token row per sequence per
// token; one scalar std::exp per token was most of the sampling time (0.6 ms a row, against the 0.1 ms of
// a greedy argmax).
//
// The vector bodies take exp from glibc's vector math library (libmvec, part of libc6), within 4 ulp of
// the true exp (glibc's scalar exp within 1). The weights are doubles, so the sums a sampler cuts at stay
// far more exact than the float logits they come from. The difference `x * scale - shift` is rounded to
// float exactly as a scalar `float l = x * scale; l - shift` is (no fused multiply-subtract), so a weight is
// the exp of the very logit the sampler keeps beside it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace spark::kernels {

// Weight buckets (top-p's cut): a weight exp(logit - max) in (0, 1] by its binary exponent (64 below 1) and
// top 4 mantissa bits. The key never decreases as the weight falls, so every bucket is a run of the
// most-likely-first order; the last one holds everything under 2^-63 * 17/16.
constexpr int kWeightBuckets = 64 * 16;

inline int weight_bucket(double weight) {
  const uint64_t bits = std::bit_cast<uint64_t>(weight);
  const int below_one = 1023 - static_cast<int>(bits >> 52);  // 0 for [1, 2); weights are not negative
  const int key = below_one * 16 + 15 - static_cast<int>((bits >> 48) & 15);
  return std::clamp(key, 0, kWeightBuckets - 1);
}

// The least weight in bucket `key` (< kWeightBuckets - 1): a weight is at or above it exactly when its
// bucket is `key` or one before.
inline double weight_bucket_least(int key) {
  const uint64_t exponent = 1023 - static_cast<uint64_t>(key / 16);
  const uint64_t top_mantissa = 15 - static_cast<uint64_t>(key % 16);
  return std::bit_cast<double>(exponent << 52 | top_mantissa << 48);
}

// Below these exp arguments a weight counts as 0: exp(-708) = 3.3e-307 is near the least normal double and
// expf(-87) = 1.6e-38 the least normal float, against the largest weight's 1 (the argument is shifted by
// the maximum). libmvec computes lanes beyond its range (underflow, -inf, NaN) on a scalar path, 10x
// slower over a whole row; such lanes are never given to it.
constexpr float kLeastExpArgument = -708.0f;
constexpr float kLeastExpfArgument = -87.0f;

// Greedy decoding: the first index of the largest x[i] (NaN never wins; 0 when nothing is above -inf).
size_t argmax(const float* x, size_t n);

// The largest x[i] * scale over the x[i] > -inf (NaN skipped): -inf when there is none.
float scaled_max(const float* x, size_t n, float scale);

// w[i] = exp(double(x[i] * scale - shift)) where x[i] > -inf and the argument is at least kLeastExpArgument,
// else 0 (NaN too); returns the sum of the w[i] at or above `floor` (min_p's kept mass; 0: all).
double exp_weights(const float* x, size_t n, float scale, float shift, double floor, double* w);

// The sum of exp(x[i] - shift) over the x[i] > -inf with x[i] - shift >= kLeastExpfArgument, each exp in
// float (summed in double): log-sum-exp for logprobs, which are reported as floats. A float exp is within an
// ulp or two (1.2e-7 relative), so log(sum) is within 2.4e-7 of the double-precision one, under the float
// rounding of a log-probability near log_z (an ulp of 12 is 9.5e-7); the vector exp of floats costs a quarter
// of the doubles'.
double exp_sum(const float* x, size_t n, float shift);

// masses[weight_bucket(w[i])] += w[i] for every w[i] >= floor (masses: kWeightBuckets, as the caller left
// them).
void weight_bucket_masses(const double* w, size_t n, double floor, double* masses);

// Writes the ids i with lo <= w[i] < hi to ids (room for n), in increasing order; returns how many.
size_t ids_in_range(const double* w, size_t n, double lo, double hi, int32_t* ids);

// The token a draw r picks among the weights at or above `floor` (> 0), in id order: the first i where the
// running sum of those weights exceeds r. When rounding leaves r unreached, the last of them; n when there
// is none. The vector bodies subtract whole blocks' sums, so a draw within rounding of a boundary may pick
// its neighbour: the same distribution.
size_t pick_weight(const double* w, size_t n, double floor, double r);

size_t argmax_ref(const float* x, size_t n);
float scaled_max_ref(const float* x, size_t n, float scale);
double exp_weights_ref(const float* x, size_t n, float scale, float shift, double floor, double* w);
size_t pick_weight_ref(const double* w, size_t n, double floor, double r);
double exp_sum_ref(const float* x, size_t n, float shift);
void weight_bucket_masses_ref(const double* w, size_t n, double floor, double* masses);
size_t ids_in_range_ref(const double* w, size_t n, double lo, double hi, int32_t* ids);

// The bodies' shared scalar end: resolves the pick from `from` with r left, else the last weight at or
// above the floor anywhere in the row.
size_t pick_weight_from(const double* w, size_t n, double floor, double r, size_t from);

}  // namespace spark::kernels
