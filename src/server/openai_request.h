// Parsing and validation of OpenAI request bodies. Every field a client can get wrong (wrong type, out of
// range, unknown tool_choice) is an ApiError 400 naming the parameter, before anything reaches the engine.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/generation_config.h"
#include "server/structured_output.h"
#include "spark/engine.h"

namespace spark {

using ordered_json = nlohmann::ordered_json;

// {key: value}, built without a one-element braced list (which GCC and clang read differently).
inline ordered_json json_object_of(const std::string& key, ordered_json value) {
  ordered_json j = ordered_json::object();
  j[key] = std::move(value);
  return j;
}

struct CommonRequest {
  std::string model;
  SamplingParams sampling;
  bool max_tokens_given = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  std::vector<std::string> stop;
  bool return_token_ids = false;
  std::optional<StructuredOutput> structured;  // response_format / structured_outputs / guided_*
};

// Caps on what one request may ask for, each refused with a 400 naming the parameter. The server sets them
// from its flags (--max-n, --max-logprobs ...); vocab_size (0: unchecked) bounds logit_bias and
// stop_token_ids ids.
struct RequestLimits {
  int max_n = 16;
  int max_stop_strings = 16;
  int max_stop_string_bytes = 1024;
  int max_tools = 128;
  int64_t max_tool_schema_bytes = 64 * 1024;
  // A structured output's schema (as JSON), regex or choices. Its compile runs before the request queues and
  // costs time and memory with its size; the largest of the 338 JSONSchemaBench cases is 309 KB.
  int64_t max_structured_output_bytes = 1 << 20;
  int max_logit_bias = 1024;
  int max_logprobs = 20;
  int64_t vocab_size = 0;
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

struct ChatRequest : CommonRequest {
  ordered_json messages;  // normalised: tool-call arguments as objects, `reasoning` as reasoning_content
  ordered_json tools;     // null or an array
  ToolChoiceMode tool_choice = ToolChoiceMode::kAuto;
  std::string tool_choice_name;
  bool add_generation_prompt = true;
  ordered_json chat_template_kwargs = ordered_json::object();
  std::optional<int> reasoning_budget;  // max_reasoning_tokens / thinking_token_budget
  // The budget came from reasoning_effort, not an explicit count: a forced tool call or structured output
  // may shrink it to leave room for the reply.
  bool reasoning_budget_from_effort = false;
  bool parallel_tool_calls = true;
  bool logprobs = false;
  int top_logprobs = 0;
};

struct CompletionRequest : CommonRequest {
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;  // when the prompt was given as token ids
  bool echo = false;
  int logprobs = -1;  // legacy completions: an integer count, or absent
};

// A request body as JSON, its nesting bounded (util/bounded_json.h) before anything recurses over it;
// malformed, too deep or not an object -> ApiError 400.
ordered_json parse_request_body(const std::string& body);

// Fields the body omits take `defaults` (generation_config.json's) where it has them, else OpenAI's.
ChatRequest parse_chat_request(const ordered_json& body, const RequestLimits& limits = {},
                               const GenerationConfig& defaults = {});
CompletionRequest parse_completion_request(const ordered_json& body, const RequestLimits& limits = {},
                                           const GenerationConfig& defaults = {});

// /tokenize: {"prompt": text} or a chat request's {"messages", "tools", ...}.
struct TokenizeRequest {
  std::optional<std::string> prompt;
  ChatRequest chat;  // when `prompt` is not given
};
TokenizeRequest parse_tokenize_request(const ordered_json& body, const RequestLimits& limits = {});

// reasoning_effort (chat) / reasoning.effort (responses): none and minimal turn thinking off; low, medium
// and high turn it on with these reasoning budgets (tokens). Unknown efforts: ApiError 400 naming `param`.
constexpr int kReasoningBudgetLow = 512;
constexpr int kReasoningBudgetMedium = 2048;
constexpr int kReasoningBudgetHigh = 8192;
void apply_reasoning_effort(const std::string& effort, ChatRequest& r, const std::string& param);

// True when every byte sequence of s is valid UTF-8.
bool is_valid_utf8(const std::string& s);

}  // namespace spark
