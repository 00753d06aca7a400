#include "chat/chat_template_loader.h"
#include "util/bounded_json.h"
#include "util/text_file.h"

namespace spark {

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// The tokens transformers puts in special_tokens_map (and so in every template's context).
constexpr const char* kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};

ordered_json read_json(const fs::path& path) {
  try {
    return parse_json_bounded<ordered_json>(read_text_file(path));
  } catch (const ordered_json::parse_error& e) {
    throw Error(path.string() + ": invalid JSON: " + e.what());
  }
}

// A token is saved either as its text or as a serialized AddedToken {"content": ..., ...}.
std::optional<std::string> token_text(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

void add_special_tokens(const ordered_json& config, ordered_json& tokens) {
  if (!config.is_object()) return;
  for (const char* key : kSpecialTokenKeys) {
    if (tokens.contains(key) || !config.contains(key)) continue;
    if (auto text = token_text(config[key])) tokens[key] = *text;
  }
  if (!tokens.contains("additional_special_tokens") && config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    ordered_json list = ordered_json::array();
    for (const auto& t : config["additional_special_tokens"]) {
      if (auto text = token_text(t)) list.push_back(*text);
    }
    tokens["additional_special_tokens"] = list;
  }
}

// tokenizer_config.json's chat_template: a string, or named templates [{"name": ..., "template": ...}].
bool take_config_template(const ordered_json& value, const fs::path& path, ChatTemplateSource& out) {
  if (value.is_string()) {
    out.text = value.get<std::string>();
    return true;
  }
  if (!value.is_array())
    throw Error(path.string() + ": chat_template must be a string or a list of named templates");
  std::optional<std::string> fallback;
  for (const auto& entry : value) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      throw Error(path.string() + ": each named chat template needs string \"name\" and \"template\"");
    }
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") fallback = entry["template"].get<std::string>();
    if (name == "tool_use") out.tool_use = entry["template"].get<std::string>();
  }
  if (!fallback) {
    throw Error(path.string() + ": the named chat templates have no \"default\" entry");
  }
  out.text = *fallback;
  return true;
}

}  // namespace

ChatTemplateSource load_chat_template(const fs::path& model_dir, const fs::path& override_file) {
  ChatTemplateSource out;
  const fs::path config_path = model_dir / "tokenizer_config.json";
  const ordered_json config = fs::exists(config_path) ? read_json(config_path) : ordered_json::object();
  add_special_tokens(config, out.special_tokens);
  const fs::path map_path = model_dir / "special_tokens_map.json";
  if (fs::exists(map_path)) add_special_tokens(read_json(map_path), out.special_tokens);

  if (!override_file.empty()) {
    out.text = read_text_file(override_file);
    out.origin = override_file.string();
    return out;
  }
  const fs::path jinja_path = model_dir / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    out.text = read_text_file(jinja_path);
    out.origin = jinja_path.string();
    return out;
  }
  if (config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null()) {
    take_config_template(config["chat_template"], config_path, out);
    out.origin = config_path.string();
    return out;
  }
  const fs::path processor_path = model_dir / "chat_template.json";
  if (fs::exists(processor_path)) {
    const ordered_json processor = read_json(processor_path);
    if (processor.is_object() && processor.contains("chat_template") &&
        processor["chat_template"].is_string()) {
      out.text = processor["chat_template"].get<std::string>();
      out.origin = processor_path.string();
      return out;
    }
  }
  throw Error(
      model_dir.string() +
      ": no chat template (looked for chat_template.jinja, \"chat_template\" in tokenizer_config.json, and "
      "chat_template.json); pass one with --chat-template FILE");
}

ChatFormatter::ChatFormatter(const ChatTemplateSource& source)
    : default_(source.text), special_tokens_(source.special_tokens) {
  if (source.tool_use) tool_use_.emplace(*source.tool_use);
}

std::string ChatFormatter::apply(const ordered_json& messages, const ordered_json& tools,
                                 bool add_generation_prompt, const ordered_json& kwargs) const {
  const ChatTemplate& tmpl = (tool_use_ && !tools.is_null()) ? *tool_use_ : default_;
  return apply_chat_template(tmpl, messages, tools, add_generation_prompt, kwargs, special_tokens_);
}

}  // namespace spark
