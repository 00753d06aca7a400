// Finds a model's chat template the way transformers does, and pairs it with the special tokens that
// apply_chat_template passes to the template (bos_token, eos_token, ...).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"

namespace spark {

struct ChatTemplateSource {
  std::string text;                     // the template used by default
  std::optional<std::string> tool_use;  // a named "tool_use" template, which HF prefers when tools are passed
  std::string origin;                   // where the template came from, for messages and logs
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // name -> token text
};

// Looks, in order, at: override_file (--chat-template) if not empty; <model_dir>/chat_template.jinja;
// tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} where "default" is
// the default and "tool_use" the tool variant); chat_template.json's "chat_template". Special tokens come
// from tokenizer_config.json (strings or {"content": ...} objects), else special_tokens_map.json.
// Throws spark::Error naming the file for unreadable or malformed files, or when no template exists.
ChatTemplateSource load_chat_template(const std::filesystem::path& model_dir,
                                      const std::filesystem::path& override_file = {});

// A model's chat template(s), parsed once, with the special tokens HF passes alongside.
class ChatFormatter {
 public:
  // Throws TemplateError if a template does not parse.
  explicit ChatFormatter(const ChatTemplateSource& source);

  // HF's apply_chat_template(messages, tools=tools, add_generation_prompt=..., **kwargs) with
  // tokenize=False; tools is null when the request has none. Throws TemplateError / spark::Error.
  std::string apply(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                    bool add_generation_prompt,
                    const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;

  const ChatTemplate& default_template() const { return default_; }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  ChatTemplate default_;
  std::optional<ChatTemplate> tool_use_;
  nlohmann::ordered_json special_tokens_;
};

}  // namespace spark
