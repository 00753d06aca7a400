#include "server/prompt_builder.h"

#include "chat/chat_template_loader.h"
#include "chat/template_error.h"
#include "server/api_error.h"

namespace spark {

class ChatTemplate;

struct PromptBuilder::Formatter {
  ChatFormatter formatter;
};

PromptBuilder::PromptBuilder(const std::filesystem::path& model_dir, const std::string& template_override,
                             const Tokenizer& tokenizer)
    : tokenizer_(tokenizer) {
  ChatTemplateSource src = load_chat_template(model_dir, template_override);
  source_ = src.origin;
  formatter_ = std::make_unique<Formatter>(Formatter{ChatFormatter(src)});
}

PromptBuilder::~PromptBuilder() = default;

ChatPrompt PromptBuilder::build(const ordered_json& messages, const ordered_json& tools, bool add_generation_prompt,
                                const ordered_json& template_kwargs) const {
  ChatPrompt p;
  try {
    p.text = formatter_->formatter.apply(messages, tools, add_generation_prompt, template_kwargs);
  } catch (const Error& e) {
    // raise_exception in the template, or a conversation the template cannot render: the client's fault.
    throw ApiError::bad_request(std::string("chat template: ") + e.what(), "messages");
  }
  // The template opens a <think> block for the model to fill (thinking on).
  static const std::string kThink = "<think>";
  p.thinking = add_generation_prompt && p.text.size() >= kThink.size() &&
               p.text.compare(p.text.size() - kThink.size(), kThink.size(), kThink) == 0;
  p.ids = tokenizer_.encode(p.text);
  return p;
}

}  // namespace spark
