// A batch of independent tasks run on threads of their own while the caller does something else: the
// engine computes its logits processors' grammar masks this way while the step's forward pass runs on the
// compute pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "util/thread_pool.h"

namespace spark {

class BackgroundBatch {
 public:
  // `n_threads` run the tasks: a dispatching thread and n_threads - 1 pool workers.
  explicit BackgroundBatch(int n_threads);
  ~BackgroundBatch();
  BackgroundBatch(const BackgroundBatch&) = delete;
  BackgroundBatch& operator=(const BackgroundBatch&) = delete;

  int threads() const { return pool_.size(); }
  // Pause instructions its pool's workers executed waiting for tasks (ThreadPool::idle_spins): the pool
  // sleeps at once between batches, on cores the forward pass needs, so this stays 0.
  uint64_t idle_spins() { return pool_.idle_spins(); }

  // Starts fn(task) for every task in [0, n_tasks) and returns at once. fn must not throw. At most one
  // batch is in flight: start() waits for the previous one first.
  void start(size_t n_tasks, std::function<void(size_t task)> fn);
  // Returns when the batch started last has finished (at once when none is in flight).
  void wait();

 private:
  void loop();

  ThreadPool pool_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void(size_t)> fn_;
  size_t n_tasks_ = 0;
  bool pending_ = false;  // started, not yet finished
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace spark
