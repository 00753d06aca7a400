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
  return Ticket(this, false);
}

std::optional<AdmissionGate::Ticket> AdmissionGate::try_enter() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (inside_ >= running_) return std::nullopt;
  ++inside_;
  return Ticket(this, false);
}

std::optional<AdmissionGate::Ticket> AdmissionGate::stand_in_line() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queued_ >= waiting_) return std::nullopt;
  ++queued_;
  return Ticket(this, true);
}

void AdmissionGate::leave(bool in_line) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (in_line) {
      --queued_;
      return;  // no place was freed
    }
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
