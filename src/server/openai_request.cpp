#include "server/openai_request.h"

#include <cmath>

#include "server/api_error.h"
#include "server/request_fields.h"
#include "util/bounded_json.h"

namespace spark {

namespace {

using request_fields::bad;
using request_fields::field;

double number(const ordered_json& body, const char* key, double fallback, double lo, double hi) {
  const ordered_json* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) bad(key, "must be a number");
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return x;
}

int64_t integer(const ordered_json& body, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  const ordered_json* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) bad(key, "must be an integer");
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

bool boolean(const ordered_json& body, const char* key, bool fallback) {
  const ordered_json* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) bad(key, "must be a boolean");
  return v->get<bool>();
}

// j == "literal" without nlohmann's comparison operators, which clang's C++20 rewritten candidates pick
// differently from GCC's.
bool is_string_value(const ordered_json& j, const char* value) {
  return j.is_string() && j.get_ref<const std::string&>() == value;
}

void check_text(const std::string& s, const std::string& param) {
  if (!is_valid_utf8(s)) bad(param, "is not valid UTF-8");
}

// vLLM refuses out-of-vocabulary ids rather than ignoring them: a typo'd id should not silently do nothing.
void check_token_id(int64_t id, const RequestLimits& limits, const char* param) {
  if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
    bad(param, "contains token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                   std::to_string(limits.vocab_size) + ")");
  }
}

// Only the types OpenAI defines. json_object and json_schema are accepted but not enforced: generation is
// not constrained to them (yet), as before this check existed.
void check_response_format(const ordered_json& body) {
  const ordered_json* rf = field(body, "response_format");
  if (rf == nullptr) return;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
    bad("response_format", "must be an object with a string 'type'");
  }
  const std::string type = (*rf)["type"].get<std::string>();
  if (type != "text" && type != "json_object" && type != "json_schema") {
    bad("response_format", "type '" + type + "' is not supported (text, json_object or json_schema)");
  }
  if (type == "json_schema" && (!rf->contains("json_schema") || !(*rf)["json_schema"].is_object())) {
    bad("response_format", "type json_schema needs a 'json_schema' object");
  }
}

void parse_common(const ordered_json& body, const RequestLimits& limits, const GenerationConfig& d,
                  CommonRequest& r) {
  if (!body.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
  if (const ordered_json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "must be a string");
    r.model = m->get<std::string>();
  }
  SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(number(body, "temperature", d.temperature.value_or(1.0), 0.0, 2.0));
  s.top_p = static_cast<float>(number(body, "top_p", d.top_p.value_or(1.0), 0.0, 1.0));
  if (s.top_p <= 0.0f) bad("top_p", "must be greater than 0");
  s.top_k = static_cast<int>(integer(body, "top_k", d.top_k.value_or(0), -1, 1 << 20));
  if (s.top_k < 0) s.top_k = 0;  // vLLM: -1 disables
  s.min_p = static_cast<float>(number(body, "min_p", d.min_p.value_or(0.0), 0.0, 1.0));
  s.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", d.repetition_penalty.value_or(1.0), 0.01, 10.0));
  if (const ordered_json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "must be an integer");
    s.seed = static_cast<uint64_t>(seed->get<int64_t>());
  }
  if (const ordered_json* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) bad("logit_bias", "must be an object mapping token ids to numbers");
    if (bias->size() > static_cast<size_t>(limits.max_logit_bias)) {
      bad("logit_bias", "has " + std::to_string(bias->size()) + " entries; at most " +
                            std::to_string(limits.max_logit_bias) + " are allowed (--max-logit-bias)");
    }
    for (auto& [k, v] : bias->items()) {
      char* end = nullptr;
      long id = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id > INT32_MAX) bad("logit_bias", "keys must be token ids");
      check_token_id(id, limits, "logit_bias");
      if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100) {
        bad("logit_bias", "values must be numbers between -100 and 100");
      }
      s.logit_bias[static_cast<int32_t>(id)] = v.get<float>();
    }
  }
  const ordered_json* mt = field(body, "max_completion_tokens");
  const char* mt_key = "max_completion_tokens";
  if (mt == nullptr) {
    mt = field(body, "max_tokens");
    mt_key = "max_tokens";
  }
  if (mt != nullptr) {
    if (!mt->is_number_integer() || mt->get<int64_t>() < 1 || mt->get<int64_t>() > (1 << 24)) {
      bad(mt_key, "must be a positive integer");
    }
    s.max_tokens = static_cast<int>(mt->get<int64_t>());
    r.max_tokens_given = true;
  }
  r.n = static_cast<int>(integer(body, "n", 1, 1, limits.max_n));
  r.structured = parse_structured_output(body);
  if (r.structured && r.structured->spec.size() > static_cast<size_t>(limits.max_structured_output_bytes)) {
    bad(r.structured->param, "is " + std::to_string(r.structured->spec.size()) + " bytes; at most " +
                                 std::to_string(limits.max_structured_output_bytes) +
                                 " are allowed (--max-structured-output-bytes)");
  }
  r.stream = boolean(body, "stream", false);
  if (const ordered_json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  if (const ordered_json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const auto& x : *stop) {
        if (!x.is_string()) bad("stop", "must be a string or a list of strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or a list of strings");
    }
    if (r.stop.size() > static_cast<size_t>(limits.max_stop_strings)) {
      bad("stop", "has " + std::to_string(r.stop.size()) + " strings; at most " +
                      std::to_string(limits.max_stop_strings) + " are allowed (--max-stop-strings)");
    }
    for (const auto& x : r.stop) {
      check_text(x, "stop");
      if (x.size() > static_cast<size_t>(limits.max_stop_string_bytes)) {
        bad("stop", "strings may be at most " + std::to_string(limits.max_stop_string_bytes) +
                        " bytes long (--max-stop-string-bytes)");
      }
    }
  }
  if (const ordered_json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) bad("stop_token_ids", "must be a list of token ids");
    if (ids->size() > static_cast<size_t>(limits.max_logit_bias)) {
      bad("stop_token_ids", "may list at most " + std::to_string(limits.max_logit_bias) + " ids");
    }
    for (const auto& x : *ids) {
      if (!x.is_number_integer()) bad("stop_token_ids", "must be a list of token ids");
      check_token_id(x.get<int64_t>(), limits, "stop_token_ids");
      s.stop_token_ids.push_back(x.get<int32_t>());
    }
  }
  s.ignore_eos = boolean(body, "ignore_eos", false);
  r.return_token_ids = boolean(body, "return_token_ids", false);
}

void validate_content(const ordered_json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) {
    if (content.is_string()) check_text(content.get<std::string>(), param);
    return;
  }
  if (!content.is_array()) bad(param, "must be a string or a list of content parts");
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      bad(param, "content parts must be objects with a type");
    }
    if (!is_string_value(part["type"], "text"))
      bad(param, "content part type '" + part["type"].get<std::string>() + "' is not supported");
    if (!part.contains("text") || !part["text"].is_string()) bad(param, "text parts need a string 'text'");
    check_text(part["text"].get<std::string>(), param);
  }
}

ordered_json normalise_messages(const ordered_json& messages) {
  if (!messages.is_array()) bad("messages", "must be a list");
  if (messages.empty()) bad("messages", "must not be empty");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    ordered_json m = messages[i];
    if (!m.is_object()) bad(p, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(p + ".role", "must be a string");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
      bad(p + ".role", "must be one of system, developer, user, assistant, tool");
    }
    if (role == "developer") m["role"] = "system";  // OpenAI's newer name for the system role
    if (m.contains("content")) validate_content(m["content"], p + ".content");
    if (role != "assistant" && (!m.contains("content") || m["content"].is_null()))
      bad(p + ".content", "is required");
    if (m.contains("reasoning") && !m.contains("reasoning_content")) m["reasoning_content"] = m["reasoning"];
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
      if (!m["reasoning_content"].is_string()) bad(p + ".reasoning_content", "must be a string");
      check_text(m["reasoning_content"].get<std::string>(), p + ".reasoning_content");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) bad(p + ".tool_calls", "must be a list");
      for (auto& tc : m["tool_calls"]) {
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object() ||
            !tc["function"].contains("name") || !tc["function"]["name"].is_string()) {
          bad(p + ".tool_calls", "entries need function.name");
        }
        auto& fn = tc["function"];
        // Templates want arguments as a mapping; clients send the JSON string OpenAI returned.
        if (!fn.contains("arguments") || fn["arguments"].is_null()) {
          fn["arguments"] = ordered_json::object();
        } else if (fn["arguments"].is_string()) {
          try {
            fn["arguments"] = parse_json_bounded<ordered_json>(fn["arguments"].get<std::string>());
          } catch (const nlohmann::json::exception&) {
            bad(p + ".tool_calls", "function.arguments is not valid JSON");
          }
          if (!fn["arguments"].is_object())
            bad(p + ".tool_calls", "function.arguments must be a JSON object");
        } else if (!fn["arguments"].is_object()) {
          bad(p + ".tool_calls", "function.arguments must be a JSON object or its string");
        }
      }
    }
    if (role == "tool" && m["content"].is_array()) {
      std::string text;
      for (const auto& part : m["content"]) text += part["text"].get<std::string>();
      m["content"] = text;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

ordered_json parse_request_body(const std::string& body) {
  ordered_json j;
  try {
    j = parse_json_bounded<ordered_json>(body);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw ApiError::bad_request(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
  return j;
}

ChatRequest parse_chat_request(const ordered_json& body, const RequestLimits& limits,
                               const GenerationConfig& defaults) {
  ChatRequest r;
  parse_common(body, limits, defaults, r);
  const ordered_json* messages = field(body, "messages");
  if (messages == nullptr) bad("messages", "is required");
  r.messages = normalise_messages(*messages);
  r.logprobs = boolean(body, "logprobs", false);
  r.top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, 0, limits.max_logprobs));
  if (r.top_logprobs > 0 && !r.logprobs) bad("top_logprobs", "needs logprobs set to true");
  r.sampling.logprobs = r.logprobs ? r.top_logprobs : -1;

  if (const ordered_json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "must be a list");
    if (tools->size() > static_cast<size_t>(limits.max_tools)) {
      bad("tools", "has " + std::to_string(tools->size()) + " entries; at most " +
                       std::to_string(limits.max_tools) + " are allowed (--max-tools)");
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const auto& t = (*tools)[i];
      const std::string p = "tools[" + std::to_string(i) + "]";
      // `type` is compared as JSON, never read with value<string>(): a non-string type is a 400, not a throw.
      if (!t.is_object() || (t.contains("type") && !is_string_value(t["type"], "function")) || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") ||
          !t["function"]["name"].is_string()) {
        bad(p, "must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      if (t["function"].contains("parameters") && !t["function"]["parameters"].is_object()) {
        bad(p + ".function.parameters", "must be a JSON schema object");
      }
      // The schema is rendered into the prompt and compiled into the call constraint: bound its size.
      const size_t bytes =
          t["function"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
      if (bytes > static_cast<size_t>(limits.max_tool_schema_bytes)) {
        bad(p + ".function", "is " + std::to_string(bytes) + " bytes of JSON; at most " +
                                 std::to_string(limits.max_tool_schema_bytes) +
                                 " are allowed (--max-tool-schema-bytes)");
      }
    }
    if (!tools->empty()) r.tools = *tools;
  }
  if (const ordered_json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string v = tc->get<std::string>();
      if (v == "auto") {
        r.tool_choice = ToolChoiceMode::kAuto;
      } else if (v == "none") {
        r.tool_choice = ToolChoiceMode::kNone;
      } else if (v == "required") {
        r.tool_choice = ToolChoiceMode::kRequired;
      } else {
        bad("tool_choice",
            "must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
    } else if (tc->is_object() && tc->contains("type") && is_string_value((*tc)["type"], "function") &&
               tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      r.tool_choice = ToolChoiceMode::kNamed;
      r.tool_choice_name = (*tc)["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice",
          "must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if ((r.tool_choice == ToolChoiceMode::kRequired || r.tool_choice == ToolChoiceMode::kNamed) &&
        r.tools.is_null()) {
      bad("tool_choice", "needs tools");
    }
    if (r.tool_choice == ToolChoiceMode::kNamed) {
      bool found = false;
      for (const auto& t : r.tools) found |= t["function"]["name"] == r.tool_choice_name;
      if (!found) bad("tool_choice", "names a function that is not in tools: " + r.tool_choice_name);
    }
  }
  check_response_format(body);
  r.add_generation_prompt = boolean(body, "add_generation_prompt", true);
  if (const ordered_json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "must be an object");
    r.chat_template_kwargs = *kw;
  }
  for (const char* key : {"max_reasoning_tokens", "thinking_token_budget"}) {
    if (field(body, key) != nullptr) r.reasoning_budget = static_cast<int>(integer(body, key, 0, 0, 1 << 24));
  }
  if (const ordered_json* effort = field(body, "reasoning_effort")) {
    if (!effort->is_string()) bad("reasoning_effort", "must be a string");
    apply_reasoning_effort(effort->get<std::string>(), r, "reasoning_effort");
  }
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls", true);
  return r;
}

void apply_reasoning_effort(const std::string& effort, ChatRequest& r, const std::string& param) {
  int budget = 0;
  if (effort == "none" || effort == "minimal") {
    budget = 0;
  } else if (effort == "low") {
    budget = kReasoningBudgetLow;
  } else if (effort == "medium") {
    budget = kReasoningBudgetMedium;
  } else if (effort == "high") {
    budget = kReasoningBudgetHigh;
  } else {
    bad(param, "must be none, minimal, low, medium or high");
  }
  // An explicit chat_template_kwargs.enable_thinking or reasoning budget wins over the effort.
  if (!r.chat_template_kwargs.contains("enable_thinking")) r.chat_template_kwargs["enable_thinking"] = budget > 0;
  if (budget > 0 && !r.reasoning_budget) {
    r.reasoning_budget = budget;
    r.reasoning_budget_from_effort = true;
  }
}

CompletionRequest parse_completion_request(const ordered_json& body, const RequestLimits& limits,
                               const GenerationConfig& defaults) {
  CompletionRequest r;
  parse_common(body, limits, defaults, r);
  const ordered_json* prompt = field(body, "prompt");
  if (prompt == nullptr) bad("prompt", "is required");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
    check_text(*r.prompt_text, "prompt");
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    r.prompt_text = (*prompt)[0].get<std::string>();
    check_text(*r.prompt_text, "prompt");
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const auto& t : *prompt) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
        bad("prompt", "must be a string or a list of token ids");
      }
      r.prompt_ids.push_back(t.get<int32_t>());
    }
  } else {
    bad("prompt", "must be a string or a non-empty list of token ids");
  }
  r.echo = boolean(body, "echo", false);
  if (field(body, "logprobs") != nullptr) {
    r.logprobs = static_cast<int>(integer(body, "logprobs", 0, 0, limits.max_logprobs));
  }
  check_response_format(body);
  r.sampling.logprobs = r.logprobs;
  return r;
}

TokenizeRequest parse_tokenize_request(const ordered_json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
  TokenizeRequest r;
  if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) bad("prompt", "must be a string");
    r.prompt = body["prompt"].get<std::string>();
    check_text(*r.prompt, "prompt");
  } else if (body.contains("messages")) {
    r.chat = parse_chat_request(body, limits);
  } else {
    throw ApiError::bad_request("give 'prompt' or 'messages'");
  }
  return r;
}

}  // namespace spark
