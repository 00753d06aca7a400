// Hugging Face chat templates rendered in C++ exactly as transformers renders them with Python's jinja2
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, `tojson` = json.dumps with
// ensure_ascii=False, `raise_exception`, `strftime_now`). Parse once, render many times, from any thread.
//
//   spark::ChatTemplate tmpl(text);                        // throws spark::TemplateError on syntax errors
//   std::string prompt = tmpl.render(context);            // context: {"messages": [...], ...}
//   std::string prompt = spark::apply_chat_template(tmpl, messages, tools, true, {{"enable_thinking",
//   false}});
//
// Contexts are nlohmann::ordered_json because key order reaches the prompt (tool arguments render in the
// client's order). Every failure is a spark::TemplateError with a one-line message naming the template line.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/interpreter.h"
#include "chat/template_error.h"

namespace spark {

using ChatTemplateLimits = jinja::RenderLimits;

class ChatTemplate {
 public:
  explicit ChatTemplate(std::string source);

  // Renders with a JSON object of template variables. Thread-safe.
  std::string render(const nlohmann::ordered_json& context, const ChatTemplateLimits& limits = {}) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Program> program_;
};

// Hugging Face's apply_chat_template(messages, tools=tools, add_generation_prompt=..., **kwargs) with
// tokenize=False: the template sees messages, tools (None when null), documents (None),
// add_generation_prompt, the tokenizer's special tokens (bos_token, eos_token, ...) and the extra kwargs
// (e.g. enable_thinking), which take precedence over the special tokens. A kwarg that collides with
// messages/tools/documents/add_generation_prompt is a spark::Error, as it is a TypeError in Python.
std::string apply_chat_template(
    const ChatTemplate& tmpl, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
    bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json::object(),
    const nlohmann::ordered_json& special_tokens = nlohmann::ordered_json::object());

}  // namespace spark
