// The Jinja chat-template engine. The first input byte picks the surface:
//   even: the rest is a template (as a checkpoint's tokenizer_config.json or --chat-template gives one),
//         parsed and rendered over a fixed tool-calling conversation with a small step budget;
//   odd:  the rest is JSON: Spark's default template renders it as the request would reach it
//         ({"messages", "tools", "kwargs"}, or a bare messages value).
// Every failure must be a spark::TemplateError (or spark::Error for bad kwargs); a crash, a sanitizer report,
// another exception or a render that outruns its step budget (a libFuzzer timeout) is a bug.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "chat/default_template.h"
#include "fuzz_check.h"
#include "spark/error.h"

using nlohmann::ordered_json;
using spark::fuzz::check;

namespace {

const ordered_json& fixed_context() {
  static const ordered_json context = ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are a phone agent."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
      {"role": "assistant", "content": "It is 21°C <b>sunny</b> 🙂"},
      {"role": "user", "content": "Thanks\n"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                              "days": {"type": "integer"}}, "required": ["city"]}}}],
    "documents": null,
    "add_generation_prompt": true,
    "enable_thinking": false,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })");
  return context;
}

const spark::ChatTemplate& default_template() {
  static const spark::ChatTemplate tmpl(spark::spark_default_chat_template());
  return tmpl;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] % 2 == 0) {
      const spark::ChatTemplate tmpl(rest);
      spark::ChatTemplateLimits limits;
      limits.max_steps = 200'000;
      limits.max_output_bytes = size_t{1} << 20;
      const std::string out = tmpl.render(fixed_context(), limits);
      check(out.size() <= limits.max_output_bytes, "output larger than max_output_bytes");
    } else {
      const ordered_json j = ordered_json::parse(rest, nullptr, false);
      if (j.is_discarded()) return 0;
      ordered_json messages = j, tools, kwargs = ordered_json::object();
      if (j.is_object() && j.contains("messages")) {
        messages = j["messages"];
        if (j.contains("tools")) tools = j["tools"];
        if (j.contains("kwargs")) kwargs = j["kwargs"];
      }
      (void)spark::apply_chat_template(default_template(), messages, tools, true, kwargs);
    }
  } catch (const spark::Error&) {
  }
  return 0;
}
