#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "spark/error.h"

namespace spark {

namespace {

int32_t token_id(const nlohmann::json& pair, const char* owner, const char* key) {
  // ["<s>", 0]
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_number_unsigned() ||
      pair[1].get<uint64_t>() > INT32_MAX) {
    throw Error(std::string("post_processor ") + owner + ": \"" + key + "\" must be [token, id]");
  }
  return pair[1].get<int32_t>();
}

// TemplateProcessing's "single": [{"SpecialToken": {"id": name}}, {"Sequence": {"id": "A"}}, ...], with
// the ids of every special token listed in "special_tokens".
PostProcessor template_processing(const nlohmann::json& j) {
  const auto single = j.find("single");
  if (single == j.end() || !single->is_array())
    throw Error("post_processor TemplateProcessing: no \"single\" list");
  const auto specials = j.find("special_tokens");
  PostProcessor p;
  bool seen_sequence = false;
  for (const auto& item : *single) {
    if (!item.is_object() || item.size() != 1) {
      throw Error("post_processor TemplateProcessing: template item " + item.dump() + " is not understood");
    }
    if (auto seq = item.find("Sequence"); seq != item.end()) {
      const std::string id = seq->is_object() ? seq->value("id", std::string()) : std::string();
      if (id != "A" || seen_sequence) {
        throw Error("post_processor TemplateProcessing: \"single\" must hold the sequence A exactly once");
      }
      seen_sequence = true;
    } else if (auto tok = item.find("SpecialToken"); tok != item.end()) {
      const std::string name = tok->is_object() ? tok->value("id", std::string()) : std::string();
      if (specials == j.end() || !specials->is_object() || !specials->contains(name)) {
        throw Error("post_processor TemplateProcessing: special token '" + name +
                    "' is not in \"special_tokens\"");
      }
      const auto& entry = (*specials)[name];
      const auto ids = entry.find("ids");
      if (ids == entry.end() || !ids->is_array()) {
        throw Error("post_processor TemplateProcessing: special token '" + name + "' has no \"ids\" list");
      }
      for (const auto& id : *ids) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX) {
          throw Error("post_processor TemplateProcessing: special token '" + name + "' has an invalid id");
        }
        (seen_sequence ? p.suffix : p.prefix).push_back(id.get<int32_t>());
      }
    } else {
      throw Error("post_processor TemplateProcessing: template item " + item.dump() + " is not understood");
    }
  }
  if (!seen_sequence) throw Error("post_processor TemplateProcessing: \"single\" has no sequence A");
  return p;
}

std::string type_of(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("post_processor must be an object, got " + j.dump());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) throw Error("post_processor without a \"type\"");
  return it->get<std::string>();
}

PostProcessor parse(const nlohmann::json& j, int depth) {
  if (j.is_null()) return {};
  const std::string type = type_of(j);
  if (type == "ByteLevel") return {};
  if (type == "TemplateProcessing") return template_processing(j);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const char* owner = type == "RobertaProcessing" ? "RobertaProcessing" : "BertProcessing";
    const auto cls = j.find("cls");
    const auto sep = j.find("sep");
    if (cls == j.end() || sep == j.end())
      throw Error(std::string("post_processor ") + owner + ": needs cls and sep");
    return {{token_id(*cls, owner, "cls")}, {token_id(*sep, owner, "sep")}};
  }
  if (type == "Sequence") {
    if (depth > 16) throw Error("post_processor: Sequence nested too deeply");
    const auto list = j.find("processors");
    if (list == j.end() || !list->is_array())
      throw Error("post_processor: Sequence without a \"processors\" list");
    // Each processor wraps what the previous ones produced.
    PostProcessor all;
    for (const auto& e : *list) {
      PostProcessor p = parse(e, depth + 1);
      p.prefix.insert(p.prefix.end(), all.prefix.begin(), all.prefix.end());
      all.suffix.insert(all.suffix.end(), p.suffix.begin(), p.suffix.end());
      all.prefix = std::move(p.prefix);
    }
    return all;
  }
  throw Error(
      "post_processor '" + type +
      "' is not supported (supported: ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, "
      "Sequence)");
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& config) {
  return parse(config, 0);
}

}  // namespace spark
