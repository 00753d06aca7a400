// The tool-call parser over model output. The first input byte picks whether calls are enabled and where
// the text is cut for the streamed run; the rest is the generated text (valid UTF-8, as the detokenizer
// guarantees: other inputs are skipped). The parser is run on the whole
// text, in two chunks and byte by byte, and everything its header promises is checked: the three runs give
// the same content, calls (ids included, from one seed), recoveries and has_calls; every call's arguments are
// a JSON object that is its own serialization; deltas carry index/id/name in OpenAI's streaming shape.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "server/tool_call_parser.h"
#include "spark/error.h"

using spark::fuzz::check;

namespace {

// Every parameter type the argument conversion distinguishes (the parser unit tests' tool set).
const nlohmann::json& tools() {
  static const nlohmann::json t = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "tap",
      "parameters": {"type": "object", "properties": {"index": {"type": "integer"}}, "required": ["index"]}}},
    {"type": "function", "function": {"name": "type_text",
      "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "submit": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "units": {"enum": ["c", "f"]},
        "lat": {"type": "number"}, "note": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "set_alarm",
      "parameters": {"type": "object", "properties": {
        "time": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object"}, "snooze": {"type": "null"}}}}},
    {"type": "function", "function": {"name": "get_time"}},
    {"type": "function", "function": {"name": "remember", "parameters": {"type": "object",
      "properties": {"content": {}}}}}
  ])");
  return t;
}

struct Run {
  spark::ParsedMessage message;
  std::vector<spark::ParseRecovery> recoveries;
  bool has_calls = false;
};

Run run(bool enabled, const std::vector<std::string_view>& chunks) {
  spark::ToolCallParser parser(tools(), enabled, spark::seeded_call_ids(7));
  Run r;
  size_t next_index = 0;
  auto take = [&](const spark::ToolParseDelta& d) {
    for (const spark::ToolCallDelta& call : d.tool_calls) {
      if (call.index == next_index) {
        check(call.id.size() == 29 && call.id.rfind("call_", 0) == 0, "first delta without a call id");
        check(!call.name.empty(), "first delta without a name");
        ++next_index;
      } else {
        check(call.index + 1 == next_index, "delta for a call that is not the latest");
        check(call.id.empty() && call.name.empty(), "id or name repeated after the first delta");
      }
      (void)call.to_openai();
    }
    r.message.append(d);
  };
  for (std::string_view chunk : chunks) take(parser.feed(chunk));
  take(parser.finish());
  r.recoveries = parser.recoveries();
  r.has_calls = parser.has_calls();
  check(r.has_calls == !r.message.tool_calls.empty(), "has_calls disagrees with the calls");
  return r;
}

void check_same(const Run& a, const Run& b, const char* how) {
  check(a.message.content == b.message.content, "content differs", how);
  check(a.message.tool_calls.size() == b.message.tool_calls.size(), "call count differs", how);
  for (size_t i = 0; i < a.message.tool_calls.size(); ++i) {
    check(a.message.tool_calls[i].id == b.message.tool_calls[i].id, "call id differs", how);
    check(a.message.tool_calls[i].name == b.message.tool_calls[i].name, "call name differs", how);
    check(a.message.tool_calls[i].arguments == b.message.tool_calls[i].arguments, "arguments differ", how);
  }
  check(a.recoveries == b.recoveries, "recoveries differ", how);
  check(a.has_calls == b.has_calls, "has_calls differs", how);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool enabled = (data[0] & 0x80) == 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  // The server feeds detokenized text, which is always valid UTF-8 (see stream_detokenizer.h).
  if (!spark::fuzz::well_formed_utf8(text)) return 0;
  const Run whole = run(enabled, {text});
  for (const spark::ParsedToolCall& call : whole.message.tool_calls) {
    const auto args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
    check(args.is_object(), "arguments are not a JSON object", call.arguments);
    check(args.dump() == call.arguments, "arguments are not their own serialization", call.arguments);
  }
  if (!enabled) {
    check(whole.message.content == text && !whole.has_calls, "disabled parser changed the text");
  }
  const size_t cut = text.empty() ? 0 : (data[0] & 0x7f) % (text.size() + 1);
  check_same(whole, run(enabled, {text.substr(0, cut), text.substr(cut)}), "two chunks");
  if (text.size() <= 4096) {  // byte by byte is quadratic in the worst case: keep executions fast
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    check_same(whole, run(enabled, bytes), "byte by byte");
  }
  return 0;
}
