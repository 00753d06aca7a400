// This machine's ceilings, measured: streaming read bandwidth and peak arithmetic throughput (f32 FMA, int8
// and bf16 dot products, AMX tiles) with the instructions of one tier: by default the active one
// (SPARK_FORCE_ISA lowers it), so an avx2 run is held to AVX2's peaks, not to those of instructions it does
// not use. A peak the tier (or the CPU) lacks is 0. The kernel benchmark prints its figures beside them,
// and spark-bench --roofline reuses them.
#pragma once

#include <cstddef>
#include <string>

#include "gemm/dispatch.h"
#include "util/thread_pool.h"

namespace spark::kernels {

// GB/s reading a buffer of `bytes` with every pool thread, median of `reps` passes after one warm-up. The
// buffer is read in 1 MiB tasks, each as four streams (its quarters) with every line prefetched 1 KiB ahead,
// as the decode GEMVs read their blocks. bytes = 0 picks max(4 x last-level cache, 512 MiB) so caches do
// not help.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = 0, int reps = 5, Isa tier = active_isa());

// GFLOP/s of independent FMA chains on every pool thread (2 flops per lane per FMA), median of `reps`.
double measure_fma_peak(ThreadPool& pool, int reps = 5, Isa tier = active_isa());

// GOP/s (2 ops per multiply-add) of int8 dot products: vpdpbusd on AVX-512 VNNI, on AVX2 the ymm vpdpbusd
// of AVX-VNNI where the CPU has it, else vpmaddubsw + vpmaddwd + vpaddd (what that tier's integer tiles
// use). Median of `reps`.
double measure_int8_peak(ThreadPool& pool, int reps = 5, Isa tier = active_isa());

// GFLOP/s of vdpbf16ps (AVX512-BF16): the ceiling of the bf16-activation kernels; 0 without AVX512-BF16.
double measure_bf16_dot_peak(ThreadPool& pool, int reps = 5, Isa tier = active_isa());

// GOP/s of AMX tdpbssd and GFLOP/s of AMX tdpbf16ps: the ceilings of the AMX tiles; 0 without AMX.
double measure_amx_int8_peak(ThreadPool& pool, int reps = 5, Isa tier = active_isa());
double measure_amx_bf16_peak(ThreadPool& pool, int reps = 5, Isa tier = active_isa());

// GOP/s of one thread's AMX tdpbssd in the kernels' 2 x 2 arrangement when every round loads its four
// operand tiles from a buffer of `bytes` (cycled): how fast the tiles can be fed from the cache level (or
// memory) that holds a buffer of that size. 0 without AMX.
double measure_amx_int8_fed(size_t bytes, int reps = 5, Isa tier = active_isa());

// Size of the last-level cache in bytes (0 if unknown).
size_t last_level_cache_bytes();

struct Roofline {
  int threads = 0;
  std::string isa;  // the tier the peaks were measured with
  double read_gbps_1t = 0, read_gbps = 0;
  double fma_gflops_1t = 0, fma_gflops = 0;
  double int8_gops_1t = 0, int8_gops = 0;
  double bf16_gflops_1t = 0, bf16_gflops = 0;          // 0: no AVX512-BF16
  double amx_int8_gops_1t = 0, amx_int8_gops = 0;      // 0: no AMX
  double amx_bf16_gflops_1t = 0, amx_bf16_gflops = 0;  // 0: no AMX
};

// All of the above with 1 thread and with the pool's threads.
Roofline measure_roofline(ThreadPool& pool, int reps = 5, Isa tier = active_isa());

// Each figure of a and b, the higher one: what the machine reached in either of two measurements (a
// measurement taken while other tenants of a shared host read memory comes out low, never high).
Roofline higher_of(const Roofline& a, const Roofline& b);

// The pool-thread peak of the instructions `a` (0 where the CPU lacks them).
double arithmetic_peak(const Roofline& r, Arithmetic a);

}  // namespace spark::kernels
