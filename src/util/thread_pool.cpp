#include "util/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace spark {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, int spin_iterations)
    : n_threads_(std::max(1, n_threads)), spin_iterations_(std::max(0, spin_iterations)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on_current_job() {
  const auto& fn = *job_;
  for (;;) {
    size_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= job_tasks_) break;
    fn(task);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    int spun = 0;
    for (; gen == seen && spun < spin_iterations_; ++spun) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      idle_spins_ += static_cast<uint64_t>(spun);
      spun = 0;
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_spins_ += static_cast<uint64_t>(spun);
      if (stopping_) return;
      if (job_ == nullptr) continue;
      ++busy_workers_;
    }
    work_on_current_job();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_workers_ == 0) done_.notify_all();
    }
  }
}

void ThreadPool::run(size_t n_tasks, const std::function<void(size_t)>& fn) {
  if (n_tasks == 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (size_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work_on_current_job();
  std::unique_lock<std::mutex> lock(mutex_);
  // A worker that has not yet picked the job up will find no tasks left; clearing job_ under the lock
  // after the busy ones finish means no worker can still be inside fn when we return.
  done_.wait(lock, [&] { return busy_workers_ == 0; });
  job_ = nullptr;
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(1, grain);
  size_t n_tasks = (n + grain - 1) / grain;
  run(n_tasks, [&](size_t task) {
    size_t begin = task * grain;
    fn(begin, std::min(n, begin + grain));
  });
}

uint64_t ThreadPool::idle_spins() {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_spins_;
}

int ThreadPool::default_threads() {
  // Count distinct (physical package, core) pairs: SMT siblings share one core's FMA units.
  std::set<std::pair<std::string, std::string>> cores;
  for (unsigned cpu = 0;; ++cpu) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core_file(base + "core_id");
    std::ifstream pkg_file(base + "physical_package_id");
    if (!core_file || !pkg_file) break;
    std::string core, pkg;
    core_file >> core;
    pkg_file >> pkg;
    cores.emplace(pkg, core);
  }
  int logical = static_cast<int>(std::thread::hardware_concurrency());
  if (cores.empty()) return std::max(1, logical);
  return std::max(1, std::min<int>(static_cast<int>(cores.size()), logical > 0 ? logical : 1 << 20));
}

}  // namespace spark
