// spark-thread-pool-bench: the cost of one ThreadPool::run beyond its work. A decode step of the 1.7B
// runs a few hundred jobs of a few microseconds each (one per GEMM, attention call, norm), so a few
// microseconds of hand-over per job is several percent of a token.
// Each case runs `jobs` jobs of `threads` equal tasks back to back; a task is a fixed chain of additions.
// Reported: the median over repetitions of the time per job, beside the time of one task run alone on
// the calling thread (the ideal job time when every thread takes one task at once).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_stats.h"
#include "util/thread_pool.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A dependent chain of `n` additions (not vectorizable, not removable).
double chain(int n) {
  volatile double sink = 0;
  double x = 0;
  for (int i = 0; i < n; ++i) x += static_cast<double>(i) * 1e-9;
  sink = x;
  return sink;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, jobs = 20000, reps = 5;
  std::vector<int> work{0, 2000, 20000};
  CLI::App app("spark-thread-pool-bench: the cost of a ThreadPool job beyond its work");
  app.add_option("--threads", threads)->check(CLI::Range(2, 1024));
  app.add_option("--jobs", jobs, "jobs per repetition")->check(CLI::Range(1, 10000000));
  app.add_option("--reps", reps, "repetitions (the median is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--work", work, "additions per task, one case each")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  spark::ThreadPool pool(threads);
  std::printf("| additions per task | one task alone, us | run() of %d tasks, us | overhead, us |\n",
              threads);
  std::printf("|---:|---:|---:|---:|\n");
  for (int n : work) {
    std::vector<double> alone, job;
    for (int r = 0; r < reps; ++r) {
      auto t = std::chrono::steady_clock::now();
      for (int j = 0; j < jobs; ++j) chain(n);
      alone.push_back(seconds_since(t) / jobs * 1e6);
      t = std::chrono::steady_clock::now();
      for (int j = 0; j < jobs; ++j) pool.run(static_cast<size_t>(threads), [n](size_t) { chain(n); });
      job.push_back(seconds_since(t) / jobs * 1e6);
    }
    const double a = spark::bench::median(alone), b = spark::bench::median(job);
    std::printf("| %d | %.2f | %.2f | %.2f |\n", n, a, b, b - a);
  }
  return 0;
}
