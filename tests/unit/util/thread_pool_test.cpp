#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace spark {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 20; ++rep) pool.run(n, [&](size_t t) { hits[t].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 20) << "threads " << threads << " task " << i;
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

TEST(ThreadPool, DefaultThreadsIsPositive) {
  EXPECT_GE(ThreadPool::default_threads(), 1);
}

}  // namespace spark
