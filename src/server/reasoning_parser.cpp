#include "server/reasoning_parser.h"

#include <algorithm>

namespace spark {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`: the bytes that might still become
// the tag once more text arrives.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  const size_t max_len = std::min(text.size(), tag.size() - 1);
  for (size_t len = max_len; len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

}  // namespace

ReasoningParser::ReasoningParser(bool thinking) : thinking_(thinking) {}

ReasoningDelta ReasoningParser::feed(std::string_view chunk) {
  ReasoningDelta out;
  held_.append(chunk);
  run(out);
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  finished_ = true;
  run(out);
  return out;
}

void ReasoningParser::run(ReasoningDelta& out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        // Thinking on: the prompt already opened the block, so a leading `<think>` is a repeat. Thinking off:
        // the prompt ends with `</think>`, and a model that repeats it must not leak the tag into content.
        const std::string_view tag = thinking_ ? kOpen : kClose;
        const State next = thinking_ ? State::kReasoning : State::kContent;
        if (std::string_view(held_).starts_with(tag)) {
          held_.erase(0, tag.size());
          recoveries_.push_back({thinking_ ? "think_open_dropped" : "think_close_dropped",
                                 "dropped " + std::string(tag) + " at the start of the output"});
          state_ = next;
          continue;
        }
        if (!finished_ && tag.starts_with(held_)) return;  // still undecided (held_ may be empty)
        state_ = next;
        continue;
      }
      case State::kReasoning: {
        const size_t at = held_.find(kClose);
        if (at != std::string::npos) {
          out.reasoning.append(held_, 0, at);
          held_.erase(0, at + kClose.size());
          state_ = State::kContent;
          continue;
        }
        const size_t keep = finished_ ? 0 : partial_tag_suffix(held_, kClose);
        out.reasoning.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::kContent:
        out.content += held_;
        held_.clear();
        return;
    }
  }
}

}  // namespace spark
