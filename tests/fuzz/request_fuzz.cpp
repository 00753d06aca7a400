// OpenAI request bodies as the HTTP handlers see them: the body text goes through parse_request_body, then
// the chat (/v1/chat/completions), completion (/v1/completions) or tokenize (/tokenize) parser, chosen by
// the first input byte. A client mistake must come back as an ApiError (HTTP 400) or spark::Error; a crash,
// a sanitizer report or any other exception (which the server answers with a 500) is a bug. Requests that
// parse are checked against what the parsers promise the rest of the server.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "spark/error.h"

namespace {

using spark::ordered_json;
using spark::fuzz::check;

void check_messages(const ordered_json& messages) {
  check(messages.is_array() && !messages.empty(), "messages not a non-empty array");
  for (const auto& m : messages) {
    check(m.is_object() && m.contains("role") && m["role"].is_string(), "message without a string role");
    const std::string role = m["role"].get<std::string>();
    check(role == "system" || role == "user" || role == "assistant" || role == "tool", "role not normalised",
          role);
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      for (const auto& tc : m["tool_calls"]) {
        check(tc["function"]["arguments"].is_object(), "tool-call arguments not normalised to an object");
      }
    }
    if (role == "tool") check(m["content"].is_string(), "tool content not joined into a string");
  }
}

void check_common(const spark::CommonRequest& r) {
  check(r.n >= 1 && r.n <= 16, "n out of range");
  check(r.sampling.temperature >= 0.0f && r.sampling.temperature <= 2.0f, "temperature out of range");
  check(r.sampling.top_p > 0.0f && r.sampling.top_p <= 1.0f, "top_p out of range");
  for (const std::string& s : r.stop) check(spark::fuzz::well_formed_utf8(s), "stop string not UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int endpoint = data[0] % 3;
  const std::string body_text(reinterpret_cast<const char*>(data + 1), size - 1);
  check(spark::is_valid_utf8(body_text) == spark::fuzz::well_formed_utf8(body_text),
        "is_valid_utf8 disagrees");
  try {
    const ordered_json body = spark::parse_request_body(body_text);
    if (endpoint == 0) {
      const spark::ChatRequest r = spark::parse_chat_request(body);
      check_common(r);
      check_messages(r.messages);
      check(r.tools.is_null() || (r.tools.is_array() && !r.tools.empty()), "tools neither null nor a list");
      check(r.chat_template_kwargs.is_object(), "chat_template_kwargs not an object");
      check(r.top_logprobs >= 0 && r.top_logprobs <= 20, "top_logprobs out of range");
    } else if (endpoint == 1) {
      const spark::CompletionRequest r = spark::parse_completion_request(body);
      check_common(r);
      check(r.prompt_text.has_value() != !r.prompt_ids.empty(), "prompt is neither text nor ids");
      if (r.prompt_text) check(spark::fuzz::well_formed_utf8(*r.prompt_text), "prompt not UTF-8");
      for (int32_t id : r.prompt_ids) check(id >= 0, "negative prompt token id");
    } else {
      const spark::TokenizeRequest r = spark::parse_tokenize_request(body);
      if (r.prompt) {
        check(spark::fuzz::well_formed_utf8(*r.prompt), "prompt not UTF-8");
      } else {
        check_messages(r.chat.messages);
      }
    }
  } catch (const spark::ApiError& e) {
    check(e.status() == 400, "request error that is not a 400", e.what());
  } catch (const spark::Error&) {
  }
  return 0;
}
