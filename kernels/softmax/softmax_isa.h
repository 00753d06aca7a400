// Per-instruction-set bodies of the softmax family, each compiled with its own target flags; dispatch.cpp
// calls them once the probe says the CPU has the ISA (tests call them directly).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spark::kernels {

size_t argmax_avx2(const float* x, size_t n);
float scaled_max_avx2(const float* x, size_t n, float scale);
double exp_weights_avx2(const float* x, size_t n, float scale, float shift, double floor, double* w);
size_t pick_weight_avx2(const double* w, size_t n, double floor, double r);
double exp_sum_avx2(const float* x, size_t n, float shift);
void weight_bucket_masses_avx2(const double* w, size_t n, double floor, double* masses);
size_t ids_in_range_avx2(const double* w, size_t n, double lo, double hi, int32_t* ids);
size_t argmax_avx512(const float* x, size_t n);
float scaled_max_avx512(const float* x, size_t n, float scale);
double exp_weights_avx512(const float* x, size_t n, float scale, float shift, double floor, double* w);
size_t pick_weight_avx512(const double* w, size_t n, double floor, double r);
double exp_sum_avx512(const float* x, size_t n, float shift);
void weight_bucket_masses_avx512(const double* w, size_t n, double floor, double* masses);
size_t ids_in_range_avx512(const double* w, size_t n, double lo, double hi, int32_t* ids);

}  // namespace spark::kernels
