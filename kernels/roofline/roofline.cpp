#include "roofline/roofline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "cpu/cpu_features.h"
#include "roofline/roofline_isa.h"
#include "spark/error.h"

namespace spark::kernels {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

bool use_avx512(Isa tier) {
  return tier >= Isa::kAvx512 && cpu_supports(Isa::kAvx512);
}

// Runs `tasks` pool tasks of `work(task)` (returning units of work done) `reps` times after one warm-up;
// returns the median rate in units per second.
template <class Work>
double median_rate(ThreadPool& pool, size_t tasks, int reps, const Work& work) {
  std::vector<double> rates;
  for (int r = -1; r < std::max(1, reps); ++r) {
    std::atomic<double> total{0.0};
    const auto t0 = Clock::now();
    pool.run(tasks, [&](size_t t) { total.fetch_add(work(t)); });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r >= 0) rates.push_back(total.load() / s);
  }
  return median(rates);
}

// G-units per second of `loop(iters, &sink)` (which returns the units it did) on 8 tasks per pool thread.
template <class Sink>
double loop_rate(ThreadPool& pool, int reps, int64_t iters, double (*loop)(int64_t, Sink*)) {
  std::atomic<bool> sink{false};
  const double rate = median_rate(pool, static_cast<size_t>(8 * pool.size()), reps, [&](size_t) {
    Sink s{};
    const double units = loop(iters, &s);
    if (s == Sink{12345}) sink = true;  // keeps the loop's result live
    return units;
  });
  return rate / 1e9;
}

}  // namespace

size_t last_level_cache_bytes() {
  for (int index = 4; index >= 0; --index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(f >> text) || text.empty()) continue;
    size_t value = std::strtoull(text.c_str(), nullptr, 10);
    const char unit = text.back();
    if (unit == 'K') value <<= 10;
    if (unit == 'M') value <<= 20;
    if (value > 0) return value;
  }
  return 0;
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps, Isa tier) {
  constexpr size_t kChunk = size_t{1} << 20;
  if (bytes == 0) bytes = std::max<size_t>(4 * last_level_cache_bytes(), size_t{512} << 20);
  bytes = (bytes + kChunk - 1) / kChunk * kChunk;
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)),
                                                     &std::free);
  if (!buf) throw Error("measure_read_bandwidth: cannot allocate " + std::to_string(bytes >> 20) + " MiB");
  // Touch every page from the pool, so pages are backed (and spread like the kernels' data would be).
  pool.parallel_for(bytes / kChunk, 1, [&](size_t b, size_t e) {
    std::memset(buf.get() + b * kChunk, static_cast<int>(b & 0xff), (e - b) * kChunk);
  });
  std::atomic<uint64_t> sink{0};
  const double bps = median_rate(pool, bytes / kChunk, reps, [&](size_t t) {
    const uint8_t* p = buf.get() + t * kChunk;
    sink.fetch_xor(use_avx512(tier) ? read_stream_avx512(p, kChunk) : read_stream_avx2(p, kChunk));
    return static_cast<double>(kChunk);
  });
  return bps / 1e9;
}

double measure_fma_peak(ThreadPool& pool, int reps, Isa tier) {
  if (tier < Isa::kAvx2 || !cpu_supports(Isa::kAvx2)) return 0.0;
  constexpr int64_t kIters = 200000;
  float sink = 0;
  const double rate = median_rate(pool, static_cast<size_t>(8 * pool.size()), reps, [&](size_t) {
    float s = 0;
    const double flops = use_avx512(tier) ? fma_loop_avx512(kIters, &s) : fma_loop_avx2(kIters, &s);
    if (s == 12345.0f) sink = s;  // keeps the loop's result live
    return flops;
  });
  (void)sink;
  return rate / 1e9;
}

double measure_int8_peak(ThreadPool& pool, int reps, Isa tier) {
  if (tier < Isa::kAvx2 || !cpu_supports(Isa::kAvx2)) return 0.0;
  constexpr int64_t kIters = 200000;
  int32_t sink = 0;
  const double rate = median_rate(pool, static_cast<size_t>(8 * pool.size()), reps, [&](size_t) {
    int32_t s = 0;
    const double ops = use_avx512(tier)          ? int8_loop_avx512(kIters, &s)
                       : cpu_features().avx_vnni ? int8_loop_avxvnni(kIters, &s)
                                                 : int8_loop_avx2(kIters, &s);
    if (s == 12345) sink = s;
    return ops;
  });
  (void)sink;
  return rate / 1e9;
}

double measure_bf16_dot_peak(ThreadPool& pool, int reps, Isa tier) {
  if (!use_avx512(tier) || !cpu_features().avx512_bf16) return 0.0;
  return loop_rate(pool, reps, 200000, bf16_dot_loop_avx512);
}

bool use_amx(Isa tier) {
  return tier >= Isa::kAmx && cpu_supports(Isa::kAmx);
}

double measure_amx_int8_peak(ThreadPool& pool, int reps, Isa tier) {
  if (!use_amx(tier) || !cpu_features().amx_int8) return 0.0;
  // A tile product takes 16 cycles or more: 20000 x 4 of them run for a millisecond or two.
  return loop_rate(pool, reps, 20000, amx_int8_loop);
}

double measure_amx_bf16_peak(ThreadPool& pool, int reps, Isa tier) {
  if (!use_amx(tier) || !cpu_features().amx_bf16) return 0.0;
  return loop_rate(pool, reps, 20000, amx_bf16_loop);
}

double measure_amx_int8_fed(size_t bytes, int reps, Isa tier) {
  if (!use_amx(tier) || !cpu_features().amx_int8) return 0.0;
  const size_t n_tiles = std::max<size_t>(4, bytes / 4096 * 4);
  std::unique_ptr<void, decltype(&std::free)> buf(std::aligned_alloc(4096, n_tiles * 1024), &std::free);
  if (!buf) throw Error("measure_amx_int8_fed: out of memory");
  std::memset(buf.get(), 1, n_tiles * 1024);
  const auto* tiles = static_cast<const int8_t*>(buf.get());
  ThreadPool one(1);
  // Each round of a big buffer misses every cache; 20000 rounds still run for well under 100 ms.
  std::atomic<bool> sink{false};
  const double rate = median_rate(one, 1, reps, [&](size_t) {
    int32_t s = 0;
    const double units = amx_int8_fed_loop(20000, tiles, n_tiles, &s);
    if (s == 12345) sink = true;
    return units;
  });
  return rate / 1e9;
}

Roofline higher_of(const Roofline& a, const Roofline& b) {
  Roofline r = a;
  for (double Roofline::*field :
       {&Roofline::read_gbps_1t, &Roofline::read_gbps, &Roofline::fma_gflops_1t, &Roofline::fma_gflops,
        &Roofline::int8_gops_1t, &Roofline::int8_gops, &Roofline::bf16_gflops_1t, &Roofline::bf16_gflops,
        &Roofline::amx_int8_gops_1t, &Roofline::amx_int8_gops, &Roofline::amx_bf16_gflops_1t,
        &Roofline::amx_bf16_gflops})
    r.*field = std::max(a.*field, b.*field);
  return r;
}

double arithmetic_peak(const Roofline& r, Arithmetic a) {
  switch (a) {
    case Arithmetic::kF32Fma:
      return r.fma_gflops;
    case Arithmetic::kInt8Dot:
      return r.int8_gops;
    case Arithmetic::kBf16Dot:
      return r.bf16_gflops;
    case Arithmetic::kAmxInt8:
      return r.amx_int8_gops;
    case Arithmetic::kAmxBf16:
      return r.amx_bf16_gflops;
  }
  return 0.0;
}

Roofline measure_roofline(ThreadPool& pool, int reps, Isa tier) {
  if (!cpu_supports(tier))
    throw Error(std::string("measure_roofline: this CPU lacks the ") + isa_name(tier) + " tier");
  Roofline r;
  r.threads = pool.size();
  r.isa = isa_name(tier);
  ThreadPool one(1);
  r.read_gbps_1t = measure_read_bandwidth(one, 0, reps, tier);
  r.read_gbps = measure_read_bandwidth(pool, 0, reps, tier);
  r.fma_gflops_1t = measure_fma_peak(one, reps, tier);
  r.fma_gflops = measure_fma_peak(pool, reps, tier);
  r.int8_gops_1t = measure_int8_peak(one, reps, tier);
  r.int8_gops = measure_int8_peak(pool, reps, tier);
  r.bf16_gflops_1t = measure_bf16_dot_peak(one, reps, tier);
  r.bf16_gflops = measure_bf16_dot_peak(pool, reps, tier);
  r.amx_int8_gops_1t = measure_amx_int8_peak(one, reps, tier);
  r.amx_int8_gops = measure_amx_int8_peak(pool, reps, tier);
  r.amx_bf16_gflops_1t = measure_amx_bf16_peak(one, reps, tier);
  r.amx_bf16_gflops = measure_amx_bf16_peak(pool, reps, tier);
  return r;
}

}  // namespace spark::kernels
