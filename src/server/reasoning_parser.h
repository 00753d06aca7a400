// Splits Spark-X2.5 output into reasoning and content, Qwen3 style: with thinking on, the generation prompt
// ends with `<think>`, so the model writes `reasoning</think>content` and everything before the first
// `</think>` is reasoning.
//
// How the server drives it: one parser per choice, constructed with the request's thinking flag (true when
// the generation prompt ends with `<think>`). Feed the detokenized text of every step to feed() and forward
// the returned reasoning/content deltas; when generation ends, call finish() once and forward what it
// returns. A non-streaming request does exactly the same and concatenates the deltas, so both paths agree by
// construction. Content deltas are the input of ToolCallParser. reasoning_closed() says whether `</think>`
// has been generated (the server counts reasoning tokens against a budget until then); a block still open at
// finish() stays reasoning (the server reports finish_reason "length" for it).
//
// Text is held back only while it may be the start of a tag this parser acts on. The parser works on bytes:
// the server must feed whole UTF-8 characters (its detokenizer holds back incomplete sequences).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark {

// One departure from the expected output format that a parser repaired or refused. The server reports these
// to the client (`spark_parse_recovery`) and counts them by kind in its metrics; no repair is silent.
struct ParseRecovery {
  std::string kind;    // stable identifier, e.g. "missing_tool_call_close"
  std::string detail;  // human-readable specifics (a tool name, the dropped text, ...)

  bool operator==(const ParseRecovery&) const = default;
};

struct ReasoningDelta {
  std::string reasoning;
  std::string content;

  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
 public:
  explicit ReasoningParser(bool thinking);

  ReasoningDelta feed(std::string_view chunk);
  // Flushes text held back as a possible partial tag. Call once, after the last feed().
  ReasoningDelta finish();

  bool thinking() const { return thinking_; }
  // True once `</think>` has been generated (never true with thinking off).
  bool reasoning_closed() const { return state_ == State::kContent && thinking_; }
  // Recoveries so far: "think_open_dropped" (a `<think>` at the start of thinking output),
  // "think_close_dropped" (a `</think>` at the start of non-thinking output).
  const std::vector<ParseRecovery>& recoveries() const { return recoveries_; }

 private:
  enum class State { kStart, kReasoning, kContent };

  void run(ReasoningDelta& out);

  bool thinking_;
  bool finished_ = false;
  State state_ = State::kStart;
  std::string held_;  // unconsumed input: only ever a possible partial tag
  std::vector<ParseRecovery> recoveries_;
};

}  // namespace spark
