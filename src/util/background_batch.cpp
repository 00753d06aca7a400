#include "util/background_batch.h"

#include <utility>

namespace spark {

// The pool sleeps between batches: it runs beside the compute pool, whose cores its spinning would take.
BackgroundBatch::BackgroundBatch(int n_threads)
    : pool_(n_threads, ThreadPool::kSleepAtOnce), thread_([this] { loop(); }) {}

BackgroundBatch::~BackgroundBatch() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !pending_; });
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundBatch::start(size_t n_tasks, std::function<void(size_t task)> fn) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !pending_; });
    fn_ = std::move(fn);
    n_tasks_ = n_tasks;
    pending_ = true;
  }
  cv_.notify_all();
}

void BackgroundBatch::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !pending_; });
}

void BackgroundBatch::loop() {
  for (;;) {
    std::function<void(size_t)> fn;
    size_t n = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return pending_ || stopping_; });
      if (stopping_) return;
      fn = std::move(fn_);
      n = n_tasks_;
    }
    pool_.run(n, fn);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace spark
