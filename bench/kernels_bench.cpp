// spark-kernels-bench: GEMM throughput per weight format and instruction-set tier at the Spark shapes,
// printed beside this machine's measured read bandwidth and arithmetic peaks.
//
// Rates are computed from the median; the best time is printed beside it (on a machine shared with other
// work the least disturbed run says more about the kernel).
// Every timed run starts with cold caches (a buffer of twice the last-level cache is streamed first), as
// in a forward pass where each layer's weights were last touched a whole step ago. Figures are medians.
// --warm instead calls each GEMM back to back with no flush: on a shape that fits in L2 (e.g. 256x2048),
// with --threads 1 --cpu-time, that is the rate a kernel can issue its instructions when memory is not
// in the way, to set beside one core's share of the read bandwidth.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "cpu/cpu_features.h"
#include "gemm/dispatch.h"
#include "roofline/roofline.h"
#include "spark/error.h"
#include "util/half.h"

namespace {

using spark::ThreadPool;
using namespace spark::kernels;
using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t n, k;
  std::string name;
};

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t x = item.find('x');
    if (x == std::string::npos) throw spark::Error("--shapes: '" + item + "' is not NxK");
    shapes.push_back({std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1)), item});
  }
  return shapes;
}

std::vector<int64_t> parse_ints(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

// Pseudo-gaussian bf16 weights (sum of 4 uniforms), fast enough for the 131072 x 2048 head.
std::vector<uint16_t> random_bf16(int64_t count, ThreadPool& pool, float sigma) {
  std::vector<uint16_t> out(static_cast<size_t>(count));
  pool.parallel_for(static_cast<size_t>(count), 1 << 20, [&](size_t begin, size_t end) {
    uint64_t s = 0x9e3779b97f4a7c15ull ^ begin;
    for (size_t i = begin; i < end; ++i) {
      float acc = 0;
      for (int j = 0; j < 4; ++j) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        acc += static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
      }
      out[i] = spark::f32_to_bf16((acc - 2.0f) * 1.732f * sigma);
    }
  });
  return out;
}

class CacheFlusher {
 public:
  explicit CacheFlusher(size_t bytes) : bytes_(bytes), buf_(new uint8_t[bytes]) {
    std::memset(buf_.get(), 1, bytes);
  }
  void flush(ThreadPool& pool) {
    constexpr size_t kChunk = 1 << 20;
    pool.parallel_for(bytes_ / kChunk, 1, [&](size_t b, size_t e) {
      uint64_t acc = 0;
      for (size_t i = b * kChunk; i < e * kChunk; i += 64) acc += buf_[i];
      sink_ += acc;
    });
  }

 private:
  size_t bytes_;
  std::unique_ptr<uint8_t[]> buf_;
  std::atomic<uint64_t> sink_{0};
};

struct Options {
  int threads = 2;
  int reps = 7;
  double budget_s = 3.0;
  std::string shapes = "3072x2048,2048x2048,13312x2048,2048x6656,131072x2048";
  std::string ms = "1,16,512";
  std::string formats = "f32,bf16,bf16act,f16,int8,w4a8,w4a16";
  std::string tiers = "best";
  bool roofline = true;
  bool cpu_time = false;
  bool warm = false;
};

// Seconds of CPU time this process has used: on a shared machine, with --threads 1, a measure of the
// kernel's own cost that other tenants' load does not inflate.
double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int run(const Options& o) {
  ThreadPool pool(o.threads);
  const CpuFeatures& f = cpu_features();
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  std::printf("# spark-kernels-bench %s, %s, %d threads, active tier %s%s\n\n", date, f.brand.c_str(),
              o.threads, isa_name(active_isa()), o.warm ? "; warm: calls back to back, no cache flush" : "");

  std::vector<Isa> tiers;
  if (o.tiers == "best") {
    tiers.push_back(active_isa());
  } else if (o.tiers == "all") {
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
      if (cpu_supports(isa)) tiers.push_back(isa);
    }
  } else {
    std::stringstream ss(o.tiers);
    std::string item;
    while (std::getline(ss, item, ',')) {
      bool found = false;
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
        if (item == isa_name(isa)) {
          if (!cpu_supports(isa)) throw spark::Error("--tiers: this CPU lacks " + item);
          tiers.push_back(isa);
          found = true;
        }
      }
      if (!found) throw spark::Error("--tiers: unknown tier '" + item + "'");
    }
  }

  // One roofline per tier: each row is held to the peaks of its own tier's instructions (an avx2 row to
  // AVX2's FMA and vpmaddubsw (or AVX-VNNI's vpdpbusd), not to AVX-512's).
  std::map<Isa, Roofline> roofs;
  if (o.roofline) {
    for (Isa tier : tiers) {
      const Roofline& roof = roofs[tier] = measure_roofline(pool, 5, tier);
      std::printf("| roof (%s) | 1 thread | %d threads |\n|---|---|---|\n", roof.isa.c_str(), roof.threads);
      std::printf("| read bandwidth GB/s | %.1f | %.1f |\n", roof.read_gbps_1t, roof.read_gbps);
      std::printf("| f32 FMA GFLOP/s | %.1f | %.1f |\n", roof.fma_gflops_1t, roof.fma_gflops);
      std::printf("| int8 dot GOP/s | %.1f | %.1f |\n", roof.int8_gops_1t, roof.int8_gops);
      std::printf("| bf16 dot (vdpbf16ps) GFLOP/s | %.1f | %.1f |\n", roof.bf16_gflops_1t, roof.bf16_gflops);
      std::printf("| AMX int8 (tdpbssd) GOP/s | %.1f | %.1f |\n", roof.amx_int8_gops_1t, roof.amx_int8_gops);
      std::printf("| AMX bf16 (tdpbf16ps) GFLOP/s | %.1f | %.1f |\n\n", roof.amx_bf16_gflops_1t,
                  roof.amx_bf16_gflops);
    }
  }

  const size_t llc = last_level_cache_bytes();
  CacheFlusher flusher(std::max<size_t>(2 * llc, size_t{256} << 20));
  std::printf("| N x K | M | format | tier | kernel | ms | best ms | GFLOP/s | weight GB/s | of roof |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : parse_shapes(o.shapes)) {
    const std::vector<uint16_t> src_bits = random_bf16(s.n * s.k, pool, 0.02f);
    const FloatWeight src{FloatDType::kBF16, src_bits.data(), s.n, s.k};
    for (const std::string& fname : [&] {
           std::vector<std::string> v;
           std::stringstream ss(o.formats);
           std::string item;
           while (std::getline(ss, item, ',')) v.push_back(item);
           return v;
         }()) {
      // "bf16act": bf16 weights with activations rounded to bf16 (vdpbf16ps / AMX-BF16 where present).
      const bool bf16_act = fname == "bf16act";
      const WeightFormat format = bf16_act ? WeightFormat::kBF16 : parse_weight_format(fname);
      QuantizedWeight w = quantize_weight(src, format, pool);
      w.bf16_activations = bf16_act;
      for (int64_t m : parse_ints(o.ms)) {
        std::vector<float> x(static_cast<size_t>(m * s.k));
        for (size_t i = 0; i < x.size(); ++i)
          x[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
        std::vector<float> y(static_cast<size_t>(m * s.n));
        for (Isa isa : tiers) {
          std::vector<double> times;
          if (o.warm) gemm_at(isa, x.data(), m, w, y.data(), s.n, pool);
          for (int r = 0; r < std::max(3, o.reps); ++r) {
            if (!o.warm) flusher.flush(pool);
            const auto t0 = Clock::now();
            const double c0 = process_cpu_seconds();
            // Warm: calls back to back for ~20 ms (at least 3), timed together.
            int calls = 0;
            do {
              gemm_at(isa, x.data(), m, w, y.data(), s.n, pool);
              ++calls;
            } while (o.warm &&
                     (calls < 3 || std::chrono::duration<double>(Clock::now() - t0).count() < 0.02));
            times.push_back((o.cpu_time ? (process_cpu_seconds() - c0) / o.threads
                                        : std::chrono::duration<double>(Clock::now() - t0).count()) /
                            calls);
            double total = 0;
            for (double t : times) total += t;
            if (r >= 2 && total > o.budget_s) break;
          }
          const double t = spark::bench::median(times);
          const double gflops = 2.0 * static_cast<double>(m) * s.n * s.k / t / 1e9;
          const double gbps = static_cast<double>(w.bytes()) / t / 1e9;
          const GemmChoice choice = describe_gemm(format, m, isa, w.bf16_activations);
          std::string roof_text = "";
          if (o.roofline) {
            // Decode is judged against bandwidth (not when warm: its weights come from cache), prefill
            // against the peak of the instructions the kernel multiplies with.
            char buf[64] = "";
            if (m <= kDecodeMaxM) {
              if (!o.warm)
                std::snprintf(buf, sizeof buf, "%.0f%% of read BW", 100.0 * gbps / roofs[isa].read_gbps);
            } else if (arithmetic_peak(roofs[isa], choice.arithmetic) > 0.0) {
              std::snprintf(buf, sizeof buf, "%.0f%% of %s peak",
                            100.0 * gflops / arithmetic_peak(roofs[isa], choice.arithmetic),
                            arithmetic_name(choice.arithmetic));
            } else {
              std::snprintf(buf, sizeof buf, "no %s peak at this tier", arithmetic_name(choice.arithmetic));
            }
            roof_text = buf;
          }
          std::printf("| %s | %lld | %s | %s | %s | %.3f | %.3f | %.1f | %.1f | %s |\n", s.name.c_str(),
                      static_cast<long long>(m), fname.c_str(), isa_name(isa), choice.kernel.c_str(), t * 1e3,
                      *std::min_element(times.begin(), times.end()) * 1e3, gflops, gbps, roof_text.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spark-kernels-bench: GEMM throughput per weight format and instruction set"};
  Options o;
  app.add_option("--threads", o.threads, "compute threads")->check(CLI::Range(1, 1024));
  app.add_option("--reps", o.reps, "timed repetitions per case (median reported; at least 3)");
  app.add_option("--budget", o.budget_s,
                 "seconds per case after which repetitions stop (at least 3 are run)");
  app.add_option("--shapes", o.shapes, "comma-separated NxK weight shapes");
  app.add_option("--m", o.ms, "comma-separated activation row counts");
  app.add_option(
      "--formats", o.formats,
      "comma-separated weight formats (f32,bf16,f16,int8,w4a8,w4a16, and bf16act: bf16 weights with "
      "bf16-rounded activations)");
  app.add_option("--tiers", o.tiers, "best, all, or a comma-separated list (scalar,avx2,avx512,amx)");
  app.add_flag("!--no-roofline", o.roofline, "skip the bandwidth / peak measurements");
  app.add_flag("--cpu-time", o.cpu_time,
               "time by process CPU time / threads instead of wall time (for --threads 1 on a busy machine)");
  app.add_flag("--warm", o.warm,
               "no cache flush: time calls back to back (on a shape that fits in L2, the rate the kernel can "
               "issue its instructions)");
  try {
    app.parse(argc, argv);
    return run(o);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
