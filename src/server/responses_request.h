// POST /v1/responses request bodies (OpenAI's Responses API) converted to the chat-completions request the
// rest of the server already runs: input items become chat messages, function tools and tool_choice take
// the chat shape, text.format becomes response_format, reasoning.effort becomes reasoning_effort and
// max_output_tokens max_completion_tokens. The converted body goes through parse_chat_request, so every
// cap and check of chat completions applies; errors name the Responses parameter.
#pragma once

#include <optional>
#include <string>

#include "server/openai_request.h"

namespace spark {

struct ResponsesRequest {
  ChatRequest chat;          // what generation runs
  ordered_json input_items;  // the whole context as items with ids: the continued history, then this input
  ordered_json echo;         // request fields a response object repeats (instructions, tools, text ...)
  std::optional<std::string> previous_response_id;
  bool store = true;
  bool stream = false;
};

// previous_response_id, read before the rest so the caller can look the history up; ApiError 400 when it is
// not a string.
std::optional<std::string> previous_response_id_of(const ordered_json& body);

// `history`: the items of the conversation previous_response_id continues (its input items and output),
// an empty array otherwise.
ResponsesRequest parse_responses_request(const ordered_json& body, const ordered_json& history,
                                         const RequestLimits& limits = {},
                                         const GenerationConfig& defaults = {});

// `input` (a string or a list of items) as items: a string is one user message; items without an id get
// one (msg_, fc_, fco_, rs_ + 24 hex digits). ApiError 400 naming `input` for anything malformed.
ordered_json normalise_input_items(const ordered_json& input);

// Items -> chat messages: message items keep their role (developer becomes system in parse_chat_request),
// content parts join into one string; function_call items become the tool_calls of an assistant message
// (consecutive calls share one); function_call_output items become tool messages; a reasoning item becomes
// the reasoning_content of the assistant message that follows it.
ordered_json items_to_messages(const ordered_json& items);

// A fresh item id: prefix + 24 hex digits.
std::string new_item_id(const char* prefix);

}  // namespace spark
