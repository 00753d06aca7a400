#include "util/background_batch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace spark {

TEST(BackgroundBatch, StartReturnsWhileTheTasksRunAndWaitSeesThemAllDone) {
  for (int threads : {1, 2, 3}) {
    BackgroundBatch batch(threads);
    EXPECT_EQ(batch.threads(), threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{200}}) {
      std::mutex mu;
      std::condition_variable cv;
      bool released = false;
      std::atomic<int> saw_release{0};
      std::vector<std::atomic<int>> hits(n);
      // Every task waits for the caller to get past start(): a start() that ran the tasks itself would
      // never see the release (each gives up after 5 s).
      batch.start(n, [&](size_t t) {
        std::unique_lock<std::mutex> lock(mu);
        if (cv.wait_for(lock, std::chrono::seconds(5), [&] { return released; })) saw_release.fetch_add(1);
        hits[t].fetch_add(1);
      });
      {
        std::lock_guard<std::mutex> lock(mu);
        released = true;
      }
      cv.notify_all();
      batch.wait();
      EXPECT_EQ(saw_release.load(), static_cast<int>(n)) << "threads " << threads;
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " task " << i;
    }
  }
}

TEST(BackgroundBatch, ConsecutiveBatchesAndDestructionWithOneInFlight) {
  std::atomic<int> done{0};
  {
    BackgroundBatch batch(2);
    for (int rep = 0; rep < 50; ++rep) batch.start(10, [&](size_t) { done.fetch_add(1); });
    // The last batch may still be running here: the destructor waits for it.
  }
  EXPECT_EQ(done.load(), 500);
}

// The engine's mask threads run beside the compute pool: between batches they must block at once, not spin
// on the cores the forward pass is using (counted, not timed).
TEST(BackgroundBatch, WorkersNeverSpinBetweenBatches) {
  BackgroundBatch batch(3);
  std::atomic<int> done{0};
  for (int rep = 0; rep < 100; ++rep) {
    batch.start(4, [&](size_t) { done.fetch_add(1); });
    batch.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(done.load(), 400);
  EXPECT_EQ(batch.idle_spins(), 0u);
}

}  // namespace spark
