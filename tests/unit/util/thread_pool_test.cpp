#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace spark {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int spin : {ThreadPool::kComputeSpin, ThreadPool::kSleepAtOnce})
    for (int threads : {1, 2, 3, 8}) {
      ThreadPool pool(threads, spin);
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
        std::vector<std::atomic<int>> hits(n);
        for (int rep = 0; rep < 20; ++rep) pool.run(n, [&](size_t t) { hits[t].fetch_add(1); });
        for (size_t i = 0; i < n; ++i)
          EXPECT_EQ(hits[i].load(), 20) << "threads " << threads << " task " << i;
      }
    }
}

TEST(ThreadPool, ParallelForCoversTheRangeWithoutOverlap) {
  ThreadPool pool(4);
  std::vector<int> seen(1001, 0);
  pool.parallel_for(seen.size(), 64, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) seen[i] += 1;
  });
  for (int v : seen) EXPECT_EQ(v, 1);
}

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU time of the whole process over `jobs` one-task jobs with a pause after each, the way the grammar
// mask pool is used: one batch per engine step, then nothing until the next step.
double cpu_seconds_between_jobs(int spin, int jobs) {
  ThreadPool pool(3, spin);
  std::atomic<int> done{0};
  double start = process_cpu_seconds();
  for (int j = 0; j < jobs; ++j) {
    pool.run(2, [&](size_t) { done.fetch_add(1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  double used = process_cpu_seconds() - start;
  EXPECT_EQ(done.load(), 2 * jobs);
  return used;
}

}  // namespace

// CPU time, not wall time: the spinning workers execute a fixed number of pause instructions after
// every job however loaded the machine is, while sleeping ones only pay their wake-ups.
TEST(ThreadPool, ASleepAtOncePoolUsesNoCpuBetweenJobs) {
  double spinning = cpu_seconds_between_jobs(ThreadPool::kComputeSpin, 100);
  double sleeping = cpu_seconds_between_jobs(ThreadPool::kSleepAtOnce, 100);
  std::printf("CPU time over 100 jobs: spinning pool %.4f s, sleep-at-once pool %.4f s\n", spinning,
              sleeping);
  EXPECT_LT(sleeping * 2, spinning) << "spinning " << spinning << " s, sleeping " << sleeping << " s";
}

TEST(ThreadPool, DefaultThreadsIsPositive) {
  EXPECT_GE(ThreadPool::default_threads(), 1);
}

}  // namespace spark
