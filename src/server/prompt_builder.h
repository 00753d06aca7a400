// Chat messages -> prompt text -> token ids, through the model's own chat template (chat_template.jinja
// or tokenizer_config.json's chat_template, or --chat-template FILE).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace spark {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
  bool thinking = false;  // the generation prompt opens a <think> block
};

class PromptBuilder {
 public:
  PromptBuilder(const std::filesystem::path& model_dir, const std::string& template_override,
                const Tokenizer& tokenizer);
  ~PromptBuilder();

  // Throws ApiError 400 when the template rejects the conversation (raise_exception, bad content).
  ChatPrompt build(const ordered_json& messages, const ordered_json& tools, bool add_generation_prompt,
                   const ordered_json& template_kwargs) const;
  const std::string& template_source() const { return source_; }

 private:
  struct Formatter;
  const Tokenizer& tokenizer_;
  std::unique_ptr<Formatter> formatter_;
  std::string source_;
};

}  // namespace spark
