#include "cpu/cpu_features.h"
#include "gemm_float/gemm_float.h"
#include "gemm_float/gemm_float_isa.h"

namespace spark::kernels {

void gemm_float(const float* x, int64_t m, const FloatWeight& w, float* y, int64_t ldy, ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  if (active_isa() >= Isa::kAvx512) {
    gemm_float_avx512(x, m, w, y, ldy, pool);
    return;
  }
  if (active_isa() >= Isa::kAvx2) {
    gemm_float_avx2(x, m, w, y, ldy, pool);
    return;
  }
  // Scalar tier: the reference, split over output rows so it still uses every thread.
  pool.parallel_for(static_cast<size_t>(w.n), 64, [&](size_t begin, size_t end) {
    FloatWeight part = w;
    part.n = static_cast<int64_t>(end - begin);
    part.data = static_cast<const uint8_t*>(w.data) + begin * w.k * float_dtype_size(w.dtype);
    gemm_float_ref(x, m, part, y + begin, ldy);
  });
}

}  // namespace spark::kernels
