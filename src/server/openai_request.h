// Parsing and validation of OpenAI request bodies. Every field a client can get wrong (wrong type, out of
// range, unknown tool_choice) is an ApiError 400 naming the parameter, before anything reaches the engine.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/structured_output.h"
#include "spark/engine.h"

namespace spark {

using ordered_json = nlohmann::ordered_json;

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

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

struct ChatRequest : CommonRequest {
  ordered_json messages;  // normalised: tool-call arguments as objects, `reasoning` as reasoning_content
  ordered_json tools;     // null or an array
  ToolChoiceMode tool_choice = ToolChoiceMode::kAuto;
  std::string tool_choice_name;
  bool add_generation_prompt = true;
  ordered_json chat_template_kwargs = ordered_json::object();
  std::optional<int> reasoning_budget;  // max_reasoning_tokens / thinking_token_budget
  bool logprobs = false;
  int top_logprobs = 0;
};

struct CompletionRequest : CommonRequest {
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;  // when the prompt was given as token ids
  bool echo = false;
  int logprobs = -1;  // legacy completions: an integer count, or absent
};

ChatRequest parse_chat_request(const ordered_json& body);
CompletionRequest parse_completion_request(const ordered_json& body);

// True when every byte sequence of s is valid UTF-8.
bool is_valid_utf8(const std::string& s);

}  // namespace spark
