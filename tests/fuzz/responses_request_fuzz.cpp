// POST /v1/responses bodies as the handler sees them: parse_request_body, then parse_responses_request with
// a stored history (the first input byte picks none, a short one, or one with calls and reasoning). A
// client mistake must come back as an ApiError 400 or spark::Error; a crash, a sanitizer report or any other
// exception is a bug. Requests that parse are checked against what the conversion promises generation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "server/api_error.h"
#include "server/responses_request.h"
#include "spark/error.h"

namespace {

using spark::ordered_json;
using spark::fuzz::check;

const ordered_json& history(uint8_t pick) {
  static const ordered_json none = ordered_json::array();
  static const ordered_json short_one = ordered_json::parse(
      R"([{"id": "msg_1", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
          {"id": "msg_2", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}])");
  static const ordered_json with_calls = ordered_json::parse(
      R"([{"id": "msg_1", "type": "message", "role": "user", "content": "go"},
          {"id": "rs_1", "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
          {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\": 1}"},
          {"id": "fco_1", "type": "function_call_output", "call_id": "call_1", "output": "ok"}])");
  return pick % 3 == 0 ? none : pick % 3 == 1 ? short_one : with_calls;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body_text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const ordered_json body = spark::parse_request_body(body_text);
    const ordered_json& past = history(data[0]);
    const spark::ResponsesRequest r = spark::parse_responses_request(body, past);
    check(r.input_items.is_array() && r.input_items.size() > past.size(), "input items lost the input");
    for (const auto& item : r.input_items)
      check(item.contains("id") && item["id"].is_string(), "item without an id");
    const ordered_json& messages = r.chat.messages;
    check(messages.is_array() && !messages.empty(), "no chat messages");
    for (const auto& m : messages) {
      const std::string role = m["role"].get<std::string>();
      check(role == "system" || role == "user" || role == "assistant" || role == "tool",
            "role not normalised", role);
      if (m.contains("tool_calls")) {
        for (const auto& tc : m["tool_calls"])
          check(tc["function"]["arguments"].is_object(), "arguments not an object");
      }
    }
    check(r.chat.n == 1, "a response has one choice");
    check(r.echo.is_object() && r.echo.contains("tools") && r.echo.contains("text"), "echo incomplete");
  } catch (const spark::ApiError& e) {
    check(e.status() == 400, "request error that is not a 400", e.what());
  } catch (const spark::Error&) {
  }
  return 0;
}
