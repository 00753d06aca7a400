#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <utility>
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

// Jobs handed over without a lock (generation, busy count): many short jobs back to back, more threads
// than cores, each job's function a fresh object on the caller's stack. No task of a job may run after
// run() returned (it would touch a dead function and the next job's counters), and every task runs once.
TEST(ThreadPool, ShortJobsBackToBackNeverLeakIntoTheNextJob) {
  for (int spin : {ThreadPool::kComputeSpin, ThreadPool::kSleepAtOnce, 50}) {
    for (int threads : {2, 3, 8}) {
      ThreadPool pool(threads, spin);
      std::atomic<int> current{-1}, stale{0};
      int64_t total = 0;
      for (int job = 0; job < 3000; ++job) {
        const size_t n = 2 + static_cast<size_t>(job % 5);
        std::vector<std::atomic<int>> hits(n);
        current.store(job);
        pool.run(n, [&hits, &current, &stale, job](size_t t) {
          if (current.load() != job) stale.fetch_add(1);
          hits[t].fetch_add(1);
        });
        current.store(-1);
        for (size_t i = 0; i < n; ++i) total += hits[i].load() == 1 ? 1 : 1000000;
        if (job % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // workers may sleep
      }
      EXPECT_EQ(stale.load(), 0) << "spin " << spin << ", " << threads << " threads";
      EXPECT_EQ(total, 3000 * 4) << "a task ran twice or not at all (spin " << spin << ", " << threads << ")";
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

// `jobs` one-task jobs with a pause after each, the way the grammar mask pool is used: one batch per engine
// step, then nothing until the next step. Returns the process's CPU seconds over them (printed only: CPU
// time depends on the machine's load and the pause instruction's latency) and the pool's idle spins.
std::pair<double, uint64_t> between_jobs(int spin, int jobs) {
  ThreadPool pool(3, spin);
  std::atomic<int> done{0};
  const double start = process_cpu_seconds();
  for (int j = 0; j < jobs; ++j) {
    pool.run(2, [&](size_t) { done.fetch_add(1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double used = process_cpu_seconds() - start;
  EXPECT_EQ(done.load(), 2 * jobs);
  return {used, pool.idle_spins()};
}

}  // namespace

// Counted, not timed: a sleep-at-once pool (the grammar mask threads, which run beside the compute pool)
// blocks as soon as it has no job, so its workers execute no pause instruction at all, however loaded the
// machine is. The spinning pool shows the count is real: its workers spin out before they block, even
// with no job ever given (the wait is bounded only so that a pool that never spins fails, not hangs).
TEST(ThreadPool, ASleepAtOncePoolNeverSpinsBetweenJobs) {
  const auto [spinning_cpu, spinning_spins] = between_jobs(ThreadPool::kComputeSpin, 100);
  const auto [sleeping_cpu, sleeping_spins] = between_jobs(ThreadPool::kSleepAtOnce, 100);
  std::printf(
      "over 100 jobs: spinning pool %.4f CPU s, %llu idle spins; sleep-at-once pool %.4f CPU s, %llu\n",
      spinning_cpu, static_cast<unsigned long long>(spinning_spins), sleeping_cpu,
      static_cast<unsigned long long>(sleeping_spins));
  EXPECT_EQ(sleeping_spins, 0u);

  ThreadPool idle(3, ThreadPool::kComputeSpin);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (idle.idle_spins() < 2 * static_cast<uint64_t>(ThreadPool::kComputeSpin) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Each of the two workers spun its full count, then blocked.
  EXPECT_EQ(idle.idle_spins(), 2 * static_cast<uint64_t>(ThreadPool::kComputeSpin));
}

TEST(ThreadPool, DefaultThreadsIsPositive) {
  EXPECT_GE(ThreadPool::default_threads(), 1);
}

}  // namespace spark
