#include "server/shutdown_signals.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

namespace spark {

namespace {

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void exit_process_now(int status) {
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}

ShutdownSignals::ShutdownSignals() {
  const sigset_t set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { watch(); });
}

ShutdownSignals::~ShutdownSignals() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  // SIGTERM is blocked everywhere, so this one stays pending for the watcher, whose sigwait() returns.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void ShutdownSignals::watch() {
  const sigset_t set = shutdown_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::unique_lock<std::mutex> lock(mu_);
    if (quit_) return;
    switch (phase_) {
      case Phase::kLoading:
        spdlog::info("signal {} while loading: exiting", sig);
        exit_process_now(0);
      case Phase::kServing:
        spdlog::info("signal {}: shutting down (a second signal exits at once)", sig);
        phase_ = Phase::kStopping;
        shutdown_requested_ = true;
        reason_ = "signal " + std::to_string(sig);
        lock.unlock();
        cv_.notify_all();
        break;
      case Phase::kStopping:
        spdlog::warn("signal {} while shutting down: exiting now", sig);
        exit_process_now(128 + sig);
    }
  }
}

void ShutdownSignals::set_serving() {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ == Phase::kLoading) phase_ = Phase::kServing;
}

void ShutdownSignals::set_stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = Phase::kStopping;
}

void ShutdownSignals::request_shutdown(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_requested_) return;
    if (phase_ == Phase::kServing) spdlog::warn("{}: shutting down", why);
    shutdown_requested_ = true;
    reason_ = why;
    phase_ = Phase::kStopping;
  }
  cv_.notify_all();
}

std::string ShutdownSignals::wait_for_shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return shutdown_requested_; });
  return reason_;
}

}  // namespace spark
