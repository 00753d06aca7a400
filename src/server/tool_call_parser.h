// Turns Spark-X2.5 content into OpenAI tool calls, incrementally.
//
// The Spark syntax is `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`, several
// calls in a row, no newlines. V is raw text for string parameters and JSON otherwise; values are converted
// by the tool's JSON-schema type (see convert_argument). Arguments come out as one JSON object text, keys in
// generation order, e.g. {"city":"Paris","days":3}; a call without arguments has "{}".
//
// How the server drives it: one parser per choice, constructed with the request's `tools` and whether calls
// are enabled (false for tool_choice "none", or no tools: then all text is content, untouched). Feed it the
// content deltas of ReasoningParser (reasoning never holds calls) and, at the end of generation, call
// finish() once. Each call returns a ToolParseDelta: content to forward as `delta.content`, and tool-call
// deltas to forward as `delta.tool_calls` (ToolCallDelta::to_openai() gives the OpenAI shape: `index` always,
// `id`, `type` and `function.name` on a call's first delta, then `function.arguments` pieces). A
// non-streaming request feeds the same way and appends every delta to a ParsedMessage, so both paths come
// from one state machine and cannot disagree. has_calls() decides finish_reason "tool_calls"; recoveries()
// lists every departure from the format that was repaired or refused (the server exposes them as
// `spark_parse_recovery` and counts them by kind).
//
// Text is held back only while it may still become a call: a partial `<tool_call>` tag, or a `[name]` /
// JSON object that may turn out to be a call written in another syntax. Inside a call, string values stream
// as they are generated; other values are sent when complete. The parser works on bytes: the server must
// feed whole UTF-8 characters.
//
// Recoveries (kind: what happened):
//   bracketed_call: `[name]` then a JSON object (the arguments, or a wrapper naming the tool) became a call
//   bare_json_call: a JSON object {"name"|"tool": NAME, "arguments"|"parameters": {...}} became a call
//   json_in_tool_call: `<tool_call>{"name": ..., "arguments": ...}</tool_call>` became a call
//   json_arguments: `<tool_call>NAME{...}</tool_call>`: the JSON object became the arguments
//   repaired_json: a JSON object cut off (end of output or a tag) was closed; detail says what was added
//   glm_whitespace: whitespace/newlines between the call's tags (GLM style) were skipped
//   missing_arg_value_open, missing_arg_key_open, missing_arg_key_close, missing_arg_value_close,
//   missing_tool_call_close: a tag was missing and implied by what followed (or by the end of output)
//   stray_arg_key_close, stray_arg_value_close: a closing tag out of place was dropped
//   missing_arg_value, unterminated_arg_key, empty_arg_key, duplicate_argument, dropped_argument,
//   value_without_key: an argument that could not be used was dropped
//   dropped_text: text inside a call that fits no part of the syntax was dropped
//   argument_coerced / argument_type_mismatch: a value was adjusted to, or does not fit, its schema type
//   unparsable_arguments: a JSON arguments object inside a call did not parse and was dropped
//   unknown_tool: a call naming a tool that was not offered stays content (detail: the name)
//   unparsable_tool_call: `<tool_call>` not followed by a tool name (or `[tool]{` by a JSON object) stays
//   content
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/reasoning_parser.h"
#include "server/tool_call_parser_json.h"
#include "server/tool_call_parser_tools.h"

namespace spark {

struct ToolCallDelta {
  size_t index = 0;
  std::string id;         // set on a call's first delta only
  std::string name;       // set on a call's first delta only
  std::string arguments;  // the next piece of the arguments JSON text (may be empty)

  // {"index", "id", "type": "function", "function": {"name", "arguments"}}; id/type/name on a first delta
  // only.
  nlohmann::json to_openai() const;
};

struct ToolParseDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;  // at most one entry per call index, in index order

  bool empty() const { return content.empty() && tool_calls.empty(); }
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a complete JSON object text
};

// The non-streaming view: the concatenation of every delta of one parser.
struct ParsedMessage {
  std::string content;
  std::vector<ParsedToolCall> tool_calls;

  void append(const ToolParseDelta& delta);
};

using CallIdGenerator = std::function<std::string()>;
// "call_" + 24 random alphanumerics, from an engine seeded by std::random_device.
CallIdGenerator random_call_ids();
// The same shape from a fixed seed, for tests and reproducible runs.
CallIdGenerator seeded_call_ids(uint64_t seed);

class ToolCallParser {
 public:
  ToolCallParser(ToolRegistry tools, bool calls_enabled, CallIdGenerator ids = random_call_ids());
  // `tools` is the request's OpenAI `tools` array; throws spark::Error when it is malformed.
  ToolCallParser(const nlohmann::json& tools, bool calls_enabled, CallIdGenerator ids = random_call_ids());

  ToolParseDelta feed(std::string_view chunk);
  // Ends the output: flushes held text, closes an unterminated call. Call once, after the last feed().
  ToolParseDelta finish();

  bool has_calls() const { return calls_ > 0; }
  size_t call_count() const { return calls_; }
  const std::vector<ParseRecovery>& recoveries() const { return recoveries_; }

 private:
  enum class State {
    kText,             // content
    kAfterCall,        // whitespace after a call: dropped if another call or the end follows
    kBracket,          // `[` that may start `[name]{...}`
    kJson,             // a JSON object that may be (or is) a call, until its brackets close
    kPassthroughJson,  // a JSON object that is not a call: content until it closes
    kCallName,         // after `<tool_call>`, before the name is complete
    kUnknownCall,      // a call of an unknown tool: content until `</tool_call>`
    kCallBody,         // in a call, between arguments
    kArgKey,           // after `<arg_key>`
    kAfterKey,         // after `</arg_key>`
    kArgValue,         // after `<arg_value>`
  };
  enum class JsonMode {
    kBare,       // in text: a call only if it names a known tool
    kBracket,    // after `[known_name]`
    kInCall,     // right after `<tool_call>`
    kArguments,  // after `<tool_call>NAME`: the arguments object of the open call
  };

  bool step();
  bool step_text();
  bool step_after_call();
  bool step_bracket();
  bool step_json();
  bool step_passthrough_json();
  bool step_call_name();
  bool step_unknown_call();
  bool step_call_body();
  bool step_arg_key();
  bool step_after_key();
  bool step_arg_value();

  std::string_view rest() const { return std::string_view(buf_).substr(pos_); }
  void consume(size_t n) { pos_ += n; }
  void release(size_t n);  // emits the next n bytes as content and consumes them
  void start_json(JsonMode mode, size_t at);
  bool finish_json(size_t end, bool closed);
  void on_key(std::string_view raw);
  void start_value();
  void finish_value(std::string_view text);
  void note_whitespace();

  void emit_content(std::string_view text);
  void begin_call(const ToolInfo& tool);
  void emit_arguments(std::string_view piece);
  void emit_key(const std::string& key);
  void end_call();
  void emit_json_call(const JsonCallShape& shape);
  void record(std::string kind, std::string detail);

  ToolRegistry tools_;
  bool enabled_;
  bool recover_json_;  // look for calls written as `[name]{...}` or bare JSON (needs known tools)
  CallIdGenerator ids_;

  std::string buf_;  // input; bytes before pos_ are consumed
  size_t pos_ = 0;
  bool eof_ = false;
  State state_ = State::kText;
  size_t scan_ = 0;  // bytes of rest() the current state has already examined
  ToolParseDelta out_;
  std::vector<ParseRecovery> recoveries_;
  size_t calls_ = 0;

  // The JSON object being followed (kJson, kPassthroughJson).
  JsonMode json_mode_ = JsonMode::kBare;
  size_t json_at_ = 0;  // offset of its `{` in rest()
  JsonScanner scanner_;
  std::string bracket_name_;

  // The open call.
  const ToolInfo* tool_ = nullptr;
  size_t args_emitted_ = 0;
  bool args_from_json_ = false;
  bool whitespace_noted_ = false;
  std::vector<std::string> keys_;
  std::string key_;
  bool value_skip_ = false;
  bool value_streaming_ = false;
  uint8_t value_types_ = 0;
};

}  // namespace spark
