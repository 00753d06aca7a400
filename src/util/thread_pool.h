// One pool of worker threads shared by every GEMM and attention call, so the process never runs more
// compute threads than --threads. The calling thread takes part in the work, so a pool of size 1 has
// no workers at all and runs everything inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spark {

class ThreadPool {
 public:
  // Workers spin this many pause instructions for the next job before they sleep. The compute pool
  // spins: a decode step issues hundreds of short GEMMs back to back and a condition-variable wake-up
  // per GEMM would cost more than the GEMM. A pool that runs beside the compute pool (the grammar mask
  // threads) must sleep at once instead, or its spinning workers take cores from the forward pass.
  static constexpr int kComputeSpin = 20000;
  static constexpr int kSleepAtOnce = 0;

  explicit ThreadPool(int n_threads, int spin_iterations = kComputeSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task) for every task in [0, n_tasks). Tasks are handed out one at a time from a shared
  // counter, so uneven tasks balance themselves. Not reentrant: fn must not call run() again.
  void run(size_t n_tasks, const std::function<void(size_t task)>& fn);

  // Splits [0, n) into about `grain`-sized ranges and calls fn(begin, end) for each.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);

  // Physical cores of this machine (falls back to logical CPUs when the topology is not readable).
  static int default_threads();

  // Pause instructions the workers have executed waiting for a job so far (counted when a worker blocks
  // or picks a job up): always 0 for a kSleepAtOnce pool. A count, so tests need not time anything.
  uint64_t idle_spins();

 private:
  void worker_loop();
  void work_on_current_job();
  void leave_job();
  void wait_for_workers();

  int n_threads_;
  int spin_iterations_;
  std::vector<std::thread> workers_;
  // A job is handed over without a lock (a decode step runs hundreds of them, a few microseconds
  // each): run() makes generation_ odd while it writes job_ / job_tasks_ / next_task_ and even once
  // they are ready; a worker announces itself in busy_ and then checks the generation is the one it
  // saw, so it never reads a job that is being written, and run() never returns while a worker that
  // may still claim a task is inside. The mutex and condition variables are only for sleeping.
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_tasks_ = 0;
  std::atomic<size_t> next_task_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_{0};
  std::atomic<int> sleepers_{0};              // workers blocked on wake_
  std::atomic<bool> caller_sleeping_{false};  // run() blocked on done_
  std::atomic<uint64_t> idle_spins_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
};

}  // namespace spark
