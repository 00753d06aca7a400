// The Responses request -> chat request conversion: input items become the chat messages the template
// renders, tools / tool_choice / text.format / reasoning.effort / max_output_tokens take their chat
// meaning, and mistakes are 400s naming the Responses parameter.
#include "server/responses_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace spark {
namespace {

ordered_json parse(const char* text) {
  return ordered_json::parse(text);
}

ResponsesRequest convert(const char* body, const ordered_json& history = ordered_json::array()) {
  return parse_responses_request(parse(body), history);
}

// The param of the ApiError a body raises ("" when it parses).
std::string error_param(const char* body) {
  try {
    convert(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().empty() ? "(none)" : e.param();
  }
  return "";
}

TEST(ResponsesRequest, StringInputIsOneUserMessageAfterInstructions) {
  ResponsesRequest r = convert(R"({"model": "m", "input": "hello", "instructions": "be brief"})");
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0]["role"].get<std::string>(), "system");
  EXPECT_EQ(r.chat.messages[0]["content"].get<std::string>(), "be brief");
  EXPECT_EQ(r.chat.messages[1]["role"].get<std::string>(), "user");
  EXPECT_EQ(r.chat.messages[1]["content"].get<std::string>(), "hello");
  // The stored input is an item with an id; the instructions are not part of it.
  ASSERT_EQ(r.input_items.size(), 1u);
  EXPECT_EQ(r.input_items[0]["type"].get<std::string>(), "message");
  EXPECT_EQ(r.input_items[0]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(r.input_items[0]["content"][0]["type"].get<std::string>(), "input_text");
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.echo["instructions"].get<std::string>(), "be brief");
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  ResponsesRequest r = convert(R"({"input": [
    {"role": "developer", "content": "rules"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"x\": 1}"},
    {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "one"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "two"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
  ]})");
  const ordered_json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0]["role"].get<std::string>(), "system");  // developer -> system
  EXPECT_EQ(m[1]["content"].get<std::string>(), "ab");
  EXPECT_EQ(m[2]["role"].get<std::string>(), "assistant");
  EXPECT_EQ(m[2]["reasoning_content"].get<std::string>(), "think");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);  // consecutive calls share one assistant message
  EXPECT_EQ(m[2]["tool_calls"][0]["id"].get<std::string>(), "call_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["x"].get<int>(), 1);  // parsed for the template
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["name"].get<std::string>(), "g");
  EXPECT_EQ(m[3]["role"].get<std::string>(), "tool");
  EXPECT_EQ(m[3]["tool_call_id"].get<std::string>(), "call_1");
  EXPECT_EQ(m[4]["content"].get<std::string>(), "two");
  EXPECT_EQ(m[5]["content"].get<std::string>(), "done");
  EXPECT_FALSE(m[5].contains("reasoning_content"));
  for (const auto& item : r.input_items) EXPECT_TRUE(item["id"].is_string());
}

TEST(ResponsesRequest, HistoryComesBeforeTheNewInput) {
  ordered_json history = parse(R"([
    {"id": "msg_a", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
    {"id": "msg_b", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "reply", "annotations": []}]}])");
  ResponsesRequest r = convert(R"({"input": "second", "previous_response_id": "resp_1"})", history);
  ASSERT_EQ(r.chat.messages.size(), 3u);
  EXPECT_EQ(r.chat.messages[0]["content"].get<std::string>(), "first");
  EXPECT_EQ(r.chat.messages[1]["content"].get<std::string>(), "reply");
  EXPECT_EQ(r.chat.messages[2]["content"].get<std::string>(), "second");
  ASSERT_EQ(r.input_items.size(), 3u);
  EXPECT_EQ(r.input_items[0]["id"].get<std::string>(), "msg_a");
  EXPECT_EQ(*r.previous_response_id, "resp_1");
}

TEST(ResponsesRequest, ToolsToolChoiceAndParallelCalls) {
  ResponsesRequest r = convert(R"({"input": "x", "parallel_tool_calls": false,
    "tools": [{"type": "function", "name": "get", "description": "d", "strict": true,
               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}],
    "tool_choice": {"type": "function", "name": "get"}})");
  ASSERT_TRUE(r.chat.tools.is_array());
  EXPECT_EQ(r.chat.tools[0]["function"]["name"].get<std::string>(), "get");
  EXPECT_TRUE(r.chat.tools[0]["function"]["strict"].get<bool>());
  EXPECT_EQ(r.chat.tool_choice, ToolChoiceMode::kNamed);
  EXPECT_EQ(r.chat.tool_choice_name, "get");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.echo["tools"][0]["name"].get<std::string>(), "get");  // echoed in the Responses shape

  EXPECT_EQ(
      convert(R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": "required"})")
          .chat.tool_choice,
      ToolChoiceMode::kRequired);
  EXPECT_EQ(convert(R"({"input": "x", "tool_choice": "none"})").chat.tool_choice, ToolChoiceMode::kNone);
}

TEST(ResponsesRequest, TextFormatBecomesStructuredOutput) {
  ResponsesRequest r =
      convert(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p", "strict": true,
    "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}})");
  ASSERT_TRUE(r.chat.structured.has_value());
  EXPECT_EQ(r.chat.structured->kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_NE(r.chat.structured->spec.find("\"a\""), std::string::npos);
  EXPECT_EQ(r.echo["text"]["format"]["name"].get<std::string>(), "p");

  r = convert(R"({"input": "x", "text": {"format": {"type": "json_object"}}})");
  ASSERT_TRUE(r.chat.structured.has_value());
  EXPECT_EQ(r.chat.structured->kind, StructuredOutput::Kind::kJsonObject);
  EXPECT_FALSE(
      convert(R"({"input": "x", "text": {"format": {"type": "text"}}})").chat.structured.has_value());
}

TEST(ResponsesRequest, ReasoningEffortAndSampling) {
  ResponsesRequest r = convert(R"({"input": "x", "reasoning": {"effort": "none"}, "max_output_tokens": 33,
                                   "temperature": 0.5, "top_p": 0.9, "metadata": {"k": "v"}, "user": "u"})");
  EXPECT_FALSE(r.chat.chat_template_kwargs["enable_thinking"].get<bool>());
  EXPECT_FALSE(r.chat.reasoning_budget.has_value());
  EXPECT_EQ(r.chat.sampling.max_tokens, 33);
  EXPECT_TRUE(r.chat.max_tokens_given);
  EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.chat.sampling.top_p, 0.9f);
  EXPECT_EQ(r.echo["metadata"]["k"].get<std::string>(), "v");
  EXPECT_EQ(r.echo["user"].get<std::string>(), "u");
  EXPECT_EQ(r.echo["max_output_tokens"].get<int>(), 33);

  r = convert(R"({"input": "x", "reasoning": {"effort": "low"}})");
  EXPECT_TRUE(r.chat.chat_template_kwargs["enable_thinking"].get<bool>());
  EXPECT_EQ(*r.chat.reasoning_budget, kReasoningBudgetLow);
  EXPECT_TRUE(r.chat.reasoning_budget_from_effort);
  EXPECT_EQ(*convert(R"({"input": "x", "reasoning": {"effort": "medium"}})").chat.reasoning_budget,
            kReasoningBudgetMedium);
  EXPECT_EQ(*convert(R"({"input": "x", "reasoning": {"effort": "high"}})").chat.reasoning_budget,
            kReasoningBudgetHigh);
  EXPECT_FALSE(convert(R"({"input": "x", "reasoning": {"effort": "minimal"}})")
                   .chat.chat_template_kwargs["enable_thinking"]
                   .get<bool>());
}

TEST(ResponsesRequest, ChatCompletionsTakesTheSameEffortAndParallelCalls) {
  ChatRequest c = parse_chat_request(parse(R"({"messages": [{"role": "developer", "content": "d"},
    {"role": "user", "content": "u"}], "reasoning_effort": "high", "parallel_tool_calls": false,
    "max_completion_tokens": 7})"));
  EXPECT_EQ(c.messages[0]["role"].get<std::string>(), "system");
  EXPECT_EQ(*c.reasoning_budget, kReasoningBudgetHigh);
  EXPECT_FALSE(c.parallel_tool_calls);
  EXPECT_EQ(c.sampling.max_tokens, 7);
  // An explicit budget or enable_thinking wins over the effort.
  c = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "u"}], "reasoning_effort": "low",
    "max_reasoning_tokens": 5, "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_EQ(*c.reasoning_budget, 5);
  EXPECT_FALSE(c.reasoning_budget_from_effort);
  EXPECT_FALSE(c.chat_template_kwargs["enable_thinking"].get<bool>());
}

TEST(ResponsesRequest, MistakesNameTheResponsesParameter) {
  EXPECT_EQ(error_param(R"({"model": "m"})"), "input");
  EXPECT_EQ(error_param(R"({"input": 5})"), "input");
  EXPECT_EQ(error_param(R"({"input": []})"), "input");
  EXPECT_EQ(error_param(R"({"input": [{"type": "message", "role": "robot", "content": "x"}]})"),
            "input[0].role");
  EXPECT_EQ(error_param(R"({"input": [{"type": "input_image"}]})"), "input[0]");
  EXPECT_EQ(error_param(
                R"({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image"}]}]})"),
            "input[0].content[0]");
  EXPECT_EQ(error_param(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"),
            "input[0].call_id");
  EXPECT_EQ(error_param(
                R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]})"),
            "input[0].tool_calls");
  EXPECT_EQ(error_param(R"({"input": "x", "max_output_tokens": 0})"), "max_output_tokens");
  EXPECT_EQ(error_param(R"({"input": "x", "text": {"format": {"type": "xml"}}})"), "text.format");
  EXPECT_EQ(error_param(R"({"input": "x", "text": {"format": {"type": "json_schema"}}})"),
            "text.format.schema");
  EXPECT_EQ(error_param(R"({"input": "x", "reasoning": {"effort": "max"}})"), "reasoning.effort");
  EXPECT_EQ(error_param(R"({"input": "x", "tools": [{"type": "web_search"}]})"), "tools[0].type");
  EXPECT_EQ(error_param(R"({"input": "x", "tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(
      error_param(
          R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})"),
      "tool_choice");
  EXPECT_EQ(error_param(R"({"input": "x", "metadata": {"k": 1}})"), "metadata");
  EXPECT_EQ(error_param(R"({"input": "x", "background": true})"), "background");
  EXPECT_EQ(error_param(R"({"input": "x", "store": "yes"})"), "store");
  EXPECT_EQ(error_param(R"({"input": "x", "previous_response_id": 3})"), "previous_response_id");
  EXPECT_EQ(error_param(R"({"input": "x", "temperature": 9})"), "temperature");
}

TEST(ResponsesRequest, RequestCapsApply) {
  RequestLimits limits;
  limits.max_tools = 1;
  const ordered_json body = parse(
      R"({"input": "x", "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}]})");
  try {
    parse_responses_request(body, ordered_json::array(), limits);
    FAIL() << "two tools passed a cap of one";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tools");
    EXPECT_NE(std::string(e.what()).find("--max-tools"), std::string::npos);
  }
}

}  // namespace
}  // namespace spark
