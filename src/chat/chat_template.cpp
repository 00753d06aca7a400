#include "chat/chat_template.h"

#include <new>

#include "chat/parser.h"

namespace spark {

TemplateError::TemplateError(Kind kind, const std::string& detail, int line)
    : Error(std::string(kind == Kind::kSyntax ? "chat template syntax error" : "chat template error") +
            " (line " + std::to_string(line) + "): " + detail),
      kind_(kind),
      detail_(detail),
      line_(line) {}

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), program_(jinja::parse_template(source_)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const ChatTemplateLimits& limits) const {
  if (!context.is_object()) {
    throw TemplateError(TemplateError::Kind::kRuntime, "the template context must be a JSON object", 0);
  }
  jinja::ContextVars variables;
  variables.reserve(context.size());
  for (const auto& [key, value] : context.items()) variables.emplace_back(key, &value);
  return render(variables, limits);
}

std::string ChatTemplate::render(const jinja::ContextVars& variables,
                                 const ChatTemplateLimits& limits) const {
  jinja::Interpreter interp(*program_, limits);
  try {
    return interp.render(variables);
  } catch (const std::bad_alloc&) {
    throw TemplateError(TemplateError::Kind::kLimit, "out of memory while rendering", 0);
  }
}

std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra_kwargs,
                                const nlohmann::ordered_json& special_tokens) {
  if (!extra_kwargs.is_object()) throw Error("chat template kwargs must be a JSON object");
  if (!special_tokens.is_object()) throw Error("special tokens must be a JSON object");
  static const nlohmann::ordered_json kNull;
  static const nlohmann::ordered_json kTrue = true;
  static const nlohmann::ordered_json kFalse = false;
  jinja::ContextVars variables = {{"messages", &messages},
                                  {"tools", &tools},
                                  {"documents", &kNull},
                                  {"add_generation_prompt", add_generation_prompt ? &kTrue : &kFalse}};
  for (const auto& [key, value] : special_tokens.items()) variables.emplace_back(key, &value);
  for (const auto& [key, value] : extra_kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
      throw Error("chat template kwarg '" + key + "' conflicts with the argument of the same name");
    }
    variables.emplace_back(key, &value);
  }
  return tmpl.render(variables);
}

}  // namespace spark
