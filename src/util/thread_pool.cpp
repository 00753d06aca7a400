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
    stopping_.store(true);
    generation_.fetch_add(2);  // stays even: spinning workers see a change, and stop
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on_current_job() {
  const auto& fn = *job_;
  for (;;) {
    const size_t task = next_task_.fetch_add(1);
    if (task >= job_tasks_) break;
    fn(task);
  }
}

void ThreadPool::leave_job() {
  if (busy_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.notify_all();
  }
}

void ThreadPool::wait_for_workers() {
  for (int spun = 0; busy_.load() != 0;) {
    if (spun < spin_iterations_) {
      cpu_relax();
      ++spun;
      continue;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    caller_sleeping_.store(true);
    done_.wait(lock, [&] { return busy_.load() == 0; });
    caller_sleeping_.store(false);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  const auto ready = [&](uint64_t gen) { return gen != seen && gen % 2 == 0; };
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    int spun = 0;
    for (; !ready(gen) && spun < spin_iterations_; ++spun) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    idle_spins_.fetch_add(static_cast<uint64_t>(spun), std::memory_order_relaxed);
    if (!ready(gen)) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] {
        gen = generation_.load();
        return ready(gen) || stopping_.load();
      });
      sleepers_.fetch_sub(1);
    }
    if (stopping_.load()) return;
    busy_.fetch_add(1);
    // All seq_cst: either run() sees this worker in busy_ before it writes the next job, or this check
    // sees run() has started writing it (an odd generation, or a later one) and the worker backs off.
    if (generation_.load() != gen) {
      leave_job();
      continue;
    }
    seen = gen;
    work_on_current_job();
    leave_job();
  }
}

void ThreadPool::run(size_t n_tasks, const std::function<void(size_t)>& fn) {
  if (n_tasks == 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (size_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  generation_.fetch_add(1);  // odd: the job is being written
  wait_for_workers();        // a worker late for the previous job leaves it first
  job_ = &fn;
  job_tasks_ = n_tasks;
  next_task_.store(0);
  generation_.fetch_add(1);  // even: ready
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  work_on_current_job();
  // Every task has been claimed, and each claimer entered busy_ before claiming, so once busy_ is 0 no
  // worker is inside fn and none can claim a task of this job again.
  wait_for_workers();
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
  return idle_spins_.load(std::memory_order_relaxed);
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
