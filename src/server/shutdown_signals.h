// SIGINT/SIGTERM for `serve`. The signals are blocked in every thread and taken by one watcher thread, so a
// graceful shutdown runs as ordinary code on the main thread, and what a signal means depends on the
// server's phase:
// - loading: nothing is lost by stopping, so the process exits at once (status 0);
// - serving: the first signal asks for a graceful shutdown (wait_for_shutdown() returns);
// - stopping (after that first signal, or after a start-up error): any signal exits at once with status
//   128 + the signal number, for an operator who will not wait for the drain.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace spark {

class ShutdownSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread and so in every thread it starts afterwards: construct
  // it before any other thread exists.
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  void set_serving();
  void set_stopping();
  // Asks for a graceful shutdown without a signal (e.g. the HTTP listener ended on its own).
  void request_shutdown(const std::string& why);
  // Blocks until a graceful shutdown is asked for; returns why ("signal 15", ...).
  std::string wait_for_shutdown();

 private:
  enum class Phase { kLoading, kServing, kStopping };
  void watch();

  std::mutex mu_;
  std::condition_variable cv_;
  Phase phase_ = Phase::kLoading;
  bool shutdown_requested_ = false;
  bool quit_ = false;
  std::string reason_;
  std::thread thread_;
};

// Flushes the logs and ends the process now, without running destructors or joining threads: for exits
// that must not wait on work still running (a model still loading, idle keep-alive connections).
[[noreturn]] void exit_process_now(int status);

}  // namespace spark
