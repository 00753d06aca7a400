// The output pipeline of one choice: token ids -> text (UTF-8 safe) -> stop strings -> reasoning split
// -> tool calls. Streaming responses forward each step's ChoiceDelta; non-streaming responses use the
// accumulated totals of the same object, so both paths are one state machine and cannot disagree.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/reasoning_parser.h"
#include "server/stop_strings.h"
#include "server/tool_call_parser.h"
#include "spark/engine.h"
#include "tokenizer/stream_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace spark {

struct ChoiceConfig {
  std::vector<std::string> stop;
  bool chat = false;      // reasoning and tool-call parsing apply to chat completions only
  bool thinking = false;  // the generation prompt ended with <think>
  nlohmann::json tools;   // the request's tools (null: none)
  bool calls_enabled = false;
  bool single_call = false;  // parallel_tool_calls false: calls after the first are dropped
  int eos_token_id = 1;
};

struct ChoiceDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<TokenEvent> tokens;  // the tokens this delta covers (ids, logprobs)
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChoiceStream {
 public:
  ChoiceStream(const Tokenizer& tokenizer, ChoiceConfig config);

  ChoiceDelta on_tokens(const std::vector<TokenEvent>& events);
  // Flushes everything held back; `reason` is how the engine ended the request.
  ChoiceDelta finish(FinishReason reason);

  // A stop string was generated: the caller cancels the engine request.
  bool stop_string_hit() const { return stop_.stopped(); }
  // "stop", "length" or "tool_calls" (valid after finish()).
  const std::string& finish_reason() const { return finish_reason_; }

  // Totals for non-streaming responses.
  const std::string& reasoning() const { return reasoning_; }
  const ParsedMessage& message() const { return message_; }
  const std::vector<TokenEvent>& tokens() const { return tokens_; }
  std::vector<ParseRecovery> recoveries() const;
  bool reasoning_closed() const { return reasoning_parser_ && reasoning_parser_->reasoning_closed(); }

 private:
  void route_text(const std::string& text, ChoiceDelta& out);
  void accumulate(ChoiceDelta& d);

  const Tokenizer& tokenizer_;
  ChoiceConfig config_;
  StreamDetokenizer detok_;
  StopStringMatcher stop_;
  std::optional<ReasoningParser> reasoning_parser_;
  std::optional<ToolCallParser> tool_parser_;
  std::string reasoning_;
  ParsedMessage message_;
  std::vector<TokenEvent> tokens_;
  std::string finish_reason_;
  bool finished_ = false;
};

// True for ids the client should not see as text: special added tokens such as BOS/EOS/PAD, but not the
// reasoning and tool-call tags the parsers need.
bool hidden_token(const Tokenizer& tokenizer, int32_t id);

}  // namespace spark
