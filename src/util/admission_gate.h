// At most `running` holders at once and at most `waiting` callers queued for a place; a caller past both
// is turned away at once instead of queueing without bound. For work that runs on request threads ahead
// of the engine (grammar compiles): a flood of costly requests then waits in a short line or gets a 429,
// and never holds every HTTP worker or every core.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>

namespace spark::util {

class AdmissionGate {
 public:
  AdmissionGate(size_t running, size_t waiting) : running_(running), waiting_(waiting) {}

  // A place, held until the Ticket is destroyed.
  class Ticket {
   public:
    Ticket(AdmissionGate* gate, bool in_line) : gate_(gate), in_line_(in_line) {}
    Ticket(Ticket&& o) noexcept : gate_(o.gate_), in_line_(o.in_line_) { o.gate_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (gate_) gate_->leave(in_line_);
    }

   private:
    AdmissionGate* gate_;
    bool in_line_;
  };

  // Waits for a place; nullopt (without waiting) when `waiting` callers already wait.
  std::optional<Ticket> enter();

  // A running place if one is free now, else nullopt (never waits).
  std::optional<Ticket> try_enter();

  // A place in the line, held (without ever running) while its holder waits for another holder's work
  // (the same grammar being compiled): such waiters count against `waiting` like the queued ones.
  // nullopt when the line is full.
  std::optional<Ticket> stand_in_line();

  // New bounds; callers already inside or waiting keep their places.
  void set_limits(size_t running, size_t waiting);

  size_t running() const;
  size_t waiting() const;

 private:
  void leave(bool in_line);

  mutable std::mutex mutex_;
  std::condition_variable freed_;
  size_t running_, waiting_;
  size_t inside_ = 0, queued_ = 0;
};

}  // namespace spark::util
