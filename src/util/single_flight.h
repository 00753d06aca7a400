// Concurrent calls for one key share one run of the work: the first caller runs it, the callers that
// arrive while it runs wait for its result (or its exception) instead of repeating it. Nothing is kept
// once the run ends (a cache in front keeps results). For grammar compiles: one costly schema sent by many
// clients at once takes one core, not one per client.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace spark::util {

template <class V>
class SingleFlight {
 public:
  // `admit_waiter`, when given, is called before a caller waits for another's run: what it returns is held
  // until the wait ends (a place in a bounded line), and it may throw to turn the caller away instead.
  V run(const std::string& key, const std::function<V()>& work,
        const std::function<std::shared_ptr<void>()>& admit_waiter = {}) {
    std::promise<V> mine;
    std::shared_future<V> theirs;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto [it, added] = calls_.try_emplace(key);
      if (added) {
        it->second = mine.get_future().share();
      } else {
        theirs = it->second;
        ++waiting_;
      }
    }
    if (theirs.valid()) {
      struct Leave {
        SingleFlight* self;
        ~Leave() {
          std::lock_guard<std::mutex> lock(self->mutex_);
          --self->waiting_;
        }
      } leave{this};
      if (theirs.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return theirs.get();
      const std::shared_ptr<void> admitted = admit_waiter ? admit_waiter() : nullptr;
      return theirs.get();
    }
    // The result is published before the key is erased: a caller arriving in between reads it at once.
    try {
      V value = work();
      mine.set_value(value);
      finish(key);
      return value;
    } catch (...) {
      mine.set_exception(std::current_exception());
      finish(key);
      throw;
    }
  }

  // Callers waiting for another caller's run.
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return waiting_;
  }

 private:
  // A caller arriving after this runs the work again (and finds the cache the work filled).
  void finish(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.erase(key);
  }

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<V>> calls_;
  size_t waiting_ = 0;
};

}  // namespace spark::util
