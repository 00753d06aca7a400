// The shared state of one request between the engine thread (producer) and the caller (consumer).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "spark/engine.h"

namespace spark {

class RequestState {
 public:
  void push(const TokenEvent& ev) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(ev);
    }
    cv_.notify_all();
  }
  // The error ending the request is the request's own fault (a spark::RequestError).
  void set_request_fault() {
    std::lock_guard<std::mutex> lock(mu_);
    request_fault_ = true;
  }
  void finish(FinishReason reason, const std::string& error = {}) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reason_ != FinishReason::kNone) return;
      reason_ = reason;
      error_ = error;
    }
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenEvent> pending_;
  FinishReason reason_ = FinishReason::kNone;
  std::string error_;
  bool request_fault_ = false;
  std::atomic<bool> cancel_requested{false};
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> cached_prompt_tokens{0};
  std::atomic<int64_t> computed_prompt_tokens{0};
};

}  // namespace spark
