// Masks for the tail of a row that does not fill a whole AVX-512 vector, shared by every family's
// AVX-512 and AMX bodies. Internal linkage: each includer is compiled with its own target flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace spark::kernels::avx512 {
namespace {

// The first `valid` of 16 f32 / s32 lanes (none for valid <= 0, all from 16).
inline __mmask16 lanes_mask(int64_t valid) {
  if (valid <= 0) return 0;
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1);
}

// The first `valid` of 32 16-bit lanes (bf16 / f16 elements).
inline __mmask32 lanes_mask32(int64_t valid) {
  if (valid <= 0) return 0;
  return valid >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << valid) - 1);
}

}  // namespace
}  // namespace spark::kernels::avx512
