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
  jinja::Interpreter interp(*program_, limits);
  try {
    return interp.render(context);
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
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [key, value] : special_tokens.items()) context[key] = value;
  for (const auto& [key, value] : extra_kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
      throw Error("chat template kwarg '" + key + "' conflicts with the argument of the same name");
    }
    context[key] = value;
  }
  return tmpl.render(context);
}

}  // namespace spark
