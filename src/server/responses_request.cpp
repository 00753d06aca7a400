#include "server/responses_request.h"

#include <random>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace spark {

namespace {

using request_fields::bad;
using request_fields::field;

bool is(const ordered_json& j, const char* value) {
  return j.is_string() && j.get_ref<const std::string&>() == value;
}

std::string string_field(const ordered_json& obj, const char* key, const std::string& param, bool required) {
  const ordered_json* v = field(obj, key);
  if (v == nullptr) {
    if (required) bad(param + "." + key, "is required");
    return {};
  }
  if (!v->is_string()) bad(param + "." + key, "must be a string");
  return v->get<std::string>();
}

// The text of a content value: a string, or parts of type input_text / output_text / text / refusal joined.
std::string content_text(const ordered_json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "must be a string or a list of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const ordered_json& part = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(p, "must be an object with a type");
    const auto& type = part["type"].get_ref<const std::string&>();
    if (type == "input_text" || type == "output_text" || type == "text" || type == "reasoning_text" ||
        type == "summary_text") {
      text += string_field(part, "text", p, true);
    } else if (type == "refusal") {
      text += string_field(part, "refusal", p, true);
    } else {
      bad(p, "has type '" + type + "'; this server takes text parts only (input_text, output_text)");
    }
  }
  return text;
}

std::string item_type(const ordered_json& item) {
  if (item.contains("type") && item["type"].is_string()) return item["type"].get<std::string>();
  if (item.contains("role")) return "message";  // EasyInputMessage: {role, content}
  return {};
}

// Renames a chat parameter in an error from parse_chat_request to the Responses field it came from.
ApiError renamed(const ApiError& e) {
  static const std::pair<const char*, const char*> names[] = {{"max_completion_tokens", "max_output_tokens"},
                                                              {"response_format", "text.format"},
                                                              {"reasoning_effort", "reasoning.effort"},
                                                              {"messages", "input"},
                                                              {"tools", "tools"}};
  std::string param = e.param(), message = e.what();
  for (const auto& [from, to] : names) {
    if (param.rfind(from, 0) == 0) {
      const std::string old_param = param;
      param = to + param.substr(std::string(from).size());
      for (size_t at = message.find(old_param); at != std::string::npos;
           at = message.find(old_param, at + param.size())) {
        message.replace(at, old_param.size(), param);
      }
      break;
    }
  }
  return ApiError(e.status(), e.type(), message, param);
}

}  // namespace

std::string new_item_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id.push_back(hex[rng() & 15]);
  return id;
}

std::optional<std::string> previous_response_id_of(const ordered_json& body) {
  const ordered_json* v = field(body, "previous_response_id");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string() || v->get_ref<const std::string&>().empty())
    bad("previous_response_id", "must be a response id");
  return v->get<std::string>();
}

ordered_json normalise_input_items(const ordered_json& input) {
  ordered_json items = ordered_json::array();
  if (input.is_string()) {
    ordered_json part = {{"type", "input_text"}, {"text", input.get<std::string>()}};
    items.push_back({{"id", new_item_id("msg_")},
                     {"type", "message"},
                     {"role", "user"},
                     {"content", ordered_json::array({part})}});
    return items;
  }
  if (!input.is_array()) bad("input", "must be a string or a list of items");
  for (size_t i = 0; i < input.size(); ++i) {
    ordered_json item = input[i];
    const std::string p = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) bad(p, "must be an object");
    const std::string type = item_type(item);
    const char* prefix = nullptr;
    if (type == "message") {
      prefix = "msg_";
      item["type"] = "message";
      const std::string role = string_field(item, "role", p, true);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        bad(p + ".role", "must be one of user, assistant, system, developer");
      }
      if (!item.contains("content")) bad(p + ".content", "is required");
      content_text(item["content"], p + ".content");  // validated here, converted later
    } else if (type == "function_call") {
      prefix = "fc_";
      string_field(item, "call_id", p, true);
      string_field(item, "name", p, true);
      string_field(item, "arguments", p, true);
    } else if (type == "function_call_output") {
      prefix = "fco_";
      string_field(item, "call_id", p, true);
      if (!item.contains("output")) bad(p + ".output", "is required");
      content_text(item["output"], p + ".output");
    } else if (type == "reasoning") {
      prefix = "rs_";
      if (item.contains("content") && !item["content"].is_null())
        content_text(item["content"], p + ".content");
      if (item.contains("summary") && !item["summary"].is_null())
        content_text(item["summary"], p + ".summary");
    } else if (type.empty()) {
      bad(p, "needs a type (message, function_call, function_call_output or reasoning)");
    } else {
      bad(p, "has type '" + type +
                 "'; this server takes message, function_call, function_call_output and reasoning items");
    }
    if (!item.contains("id") || !item["id"].is_string()) item["id"] = new_item_id(prefix);
    items.push_back(std::move(item));
  }
  return items;
}

ordered_json items_to_messages(const ordered_json& items) {
  ordered_json messages = ordered_json::array();
  std::string reasoning;  // from a reasoning item, for the next assistant message
  bool have_reasoning = false;
  // The assistant message function_call items attach to: the last message when it is an assistant's
  // and nothing but calls came after it.
  bool assistant_open = false;
  auto take_reasoning = [&](ordered_json& m) {
    if (have_reasoning) m["reasoning_content"] = reasoning;
    reasoning.clear();
    have_reasoning = false;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const ordered_json& item = items[i];
    const std::string p = "input[" + std::to_string(i) + "]";
    const std::string type = item_type(item);
    if (type == "message") {
      const std::string role = item["role"].get<std::string>();
      ordered_json m = {{"role", role}, {"content", content_text(item["content"], p + ".content")}};
      if (role == "assistant") take_reasoning(m);
      messages.push_back(std::move(m));
      assistant_open = role == "assistant";
    } else if (type == "function_call") {
      ordered_json call = {{"id", item["call_id"]},
                           {"type", "function"},
                           {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      if (!assistant_open || have_reasoning) {
        ordered_json m = {{"role", "assistant"}, {"content", ""}};
        take_reasoning(m);
        messages.push_back(std::move(m));
        assistant_open = true;
      }
      ordered_json& m = messages.back();
      if (!m.contains("tool_calls")) m["tool_calls"] = ordered_json::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", item["call_id"]},
                          {"content", content_text(item["output"], p + ".output")}});
      assistant_open = false;
    } else if (type == "reasoning") {
      const bool has_content =
          item.contains("content") && item["content"].is_array() && !item["content"].empty();
      reasoning +=
          content_text(has_content ? item["content"] : item.value("summary", ordered_json::array()), p);
      have_reasoning = true;
    }
  }
  return messages;
}

ResponsesRequest parse_responses_request(const ordered_json& body, const ordered_json& history,
                                         const RequestLimits& limits, const GenerationConfig& defaults) {
  if (!body.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
  ResponsesRequest r;
  r.previous_response_id = previous_response_id_of(body);
  const ordered_json* input = field(body, "input");
  if (input == nullptr) bad("input", "is required");
  r.input_items = history.is_array() ? history : ordered_json::array();
  for (auto& item : normalise_input_items(*input)) r.input_items.push_back(std::move(item));

  // The chat-completions body this request amounts to.
  ordered_json chat = ordered_json::object();
  ordered_json messages = ordered_json::array();
  std::string instructions;
  if (const ordered_json* ins = field(body, "instructions")) {
    if (!ins->is_string()) bad("instructions", "must be a string");
    instructions = ins->get<std::string>();
    if (!instructions.empty()) messages.push_back({{"role", "system"}, {"content", instructions}});
  }
  for (auto& m : items_to_messages(r.input_items)) messages.push_back(std::move(m));
  if (messages.empty()) bad("input", "must not be empty");
  chat["messages"] = std::move(messages);

  for (const char* key :
       {"model", "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
        "repetition_penalty", "stop", "parallel_tool_calls", "chat_template_kwargs", "max_reasoning_tokens",
        "thinking_token_budget", "ignore_eos"}) {
    if (const ordered_json* v = field(body, key)) chat[key] = *v;
  }
  if (const ordered_json* v = field(body, "max_output_tokens")) chat["max_completion_tokens"] = *v;

  ordered_json echo_tools = ordered_json::array();
  if (const ordered_json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "must be a list");
    ordered_json converted = ordered_json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const ordered_json& t = (*tools)[i];
      const std::string p = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
        bad(p, "must be an object with a type");
      if (!is(t["type"], "function")) {
        bad(p + ".type",
            "'" + t["type"].get<std::string>() + "' is not supported; this server runs function tools");
      }
      ordered_json fn = json_object_of("name", string_field(t, "name", p, true));
      for (const char* key : {"description", "parameters", "strict"}) {
        if (const ordered_json* v = field(t, key)) fn[key] = *v;
      }
      converted.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!converted.empty()) chat["tools"] = std::move(converted);
    echo_tools = *tools;
  }
  ordered_json echo_choice = "auto";
  if (const ordered_json* tc = field(body, "tool_choice")) {
    echo_choice = *tc;
    if (tc->is_string()) {
      chat["tool_choice"] = *tc;
    } else if (tc->is_object() && tc->contains("type") && is((*tc)["type"], "function")) {
      chat["tool_choice"] = {
          {"type", "function"},
          {"function", json_object_of("name", string_field(*tc, "name", "tool_choice", true))}};
    } else {
      bad("tool_choice", "must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
    }
  }
  ordered_json echo_text = json_object_of("format", json_object_of("type", "text"));
  if (const ordered_json* text = field(body, "text")) {
    if (!text->is_object()) bad("text", "must be an object");
    if (const ordered_json* format = field(*text, "format")) {
      if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
        bad("text.format", "must be an object with a string 'type'");
      }
      const auto& type = (*format)["type"].get_ref<const std::string&>();
      if (type == "json_object") {
        chat["response_format"] = json_object_of("type", "json_object");
      } else if (type == "json_schema") {
        ordered_json js = json_object_of("name", string_field(*format, "name", "text.format", false));
        const ordered_json* schema = field(*format, "schema");
        if (schema == nullptr || !schema->is_object())
          bad("text.format.schema", "must be a JSON schema object");
        js["schema"] = *schema;
        if (const ordered_json* strict = field(*format, "strict")) js["strict"] = *strict;
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
      } else if (type != "text") {
        bad("text.format", "type '" + type + "' is not supported (text, json_object or json_schema)");
      }
    }
    echo_text = *text;
    if (!echo_text.contains("format")) echo_text["format"] = json_object_of("type", "text");
  }
  ordered_json echo_reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const ordered_json* reasoning = field(body, "reasoning")) {
    if (!reasoning->is_object()) bad("reasoning", "must be an object");
    if (const ordered_json* effort = field(*reasoning, "effort")) {
      chat["reasoning_effort"] = *effort;
      echo_reasoning["effort"] = *effort;
    }
    if (const ordered_json* summary = field(*reasoning, "summary")) echo_reasoning["summary"] = *summary;
  }
  ordered_json metadata = ordered_json::object();
  if (const ordered_json* m = field(body, "metadata")) {
    // OpenAI's limits: 16 pairs, keys up to 64 characters, string values up to 512.
    if (!m->is_object() || m->size() > 16) bad("metadata", "must be an object of at most 16 string pairs");
    for (const auto& [k, v] : m->items()) {
      if (k.size() > 64 || !v.is_string() || v.get_ref<const std::string&>().size() > 512) {
        bad("metadata", "keys must be at most 64 characters and values strings of at most 512");
      }
    }
    metadata = *m;
  }
  ordered_json user = nullptr;
  if (const ordered_json* u = field(body, "user")) {
    if (!u->is_string()) bad("user", "must be a string");
    user = *u;
  }
  if (const ordered_json* bg = field(body, "background")) {
    if (!bg->is_boolean()) bad("background", "must be a boolean");
    if (bg->get<bool>()) bad("background", "is not supported; responses are produced in the request");
  }
  if (const ordered_json* store = field(body, "store")) {
    if (!store->is_boolean()) bad("store", "must be a boolean");
    r.store = store->get<bool>();
  }
  if (const ordered_json* stream = field(body, "stream")) {
    if (!stream->is_boolean()) bad("stream", "must be a boolean");
    r.stream = stream->get<bool>();
  }

  try {
    r.chat = parse_chat_request(chat, limits, defaults);
  } catch (const ApiError& e) {
    throw renamed(e);
  }
  r.echo = {{"instructions", instructions.empty() ? ordered_json(nullptr) : ordered_json(instructions)},
            {"max_output_tokens",
             chat.contains("max_completion_tokens") ? chat["max_completion_tokens"] : ordered_json(nullptr)},
            {"metadata", metadata},
            {"parallel_tool_calls", r.chat.parallel_tool_calls},
            {"reasoning", echo_reasoning},
            {"temperature", r.chat.sampling.temperature},
            {"text", echo_text},
            {"tool_choice", echo_choice},
            {"tools", echo_tools},
            {"top_p", r.chat.sampling.top_p},
            {"truncation", "disabled"},
            {"user", user}};
  return r;
}

}  // namespace spark
