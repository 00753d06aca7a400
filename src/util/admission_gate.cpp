#include "util/admission_gate.h"

namespace spark::util {

std::optional<AdmissionGate::Ticket> AdmissionGate::enter() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (inside_ >= running_) {
    if (queued_ >= waiting_) return std::nullopt;
    ++queued_;
    freed_.wait(lock, [this] { return inside_ < running_; });
    --queued_;
  }
  ++inside_;
  return Ticket(this);
}

void AdmissionGate::leave() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --inside_;
  }
  freed_.notify_one();
}

void AdmissionGate::set_limits(size_t running, size_t waiting) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = running;
    waiting_ = waiting;
  }
  freed_.notify_all();
}

size_t AdmissionGate::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inside_;
}

size_t AdmissionGate::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_;
}

}  // namespace spark::util
