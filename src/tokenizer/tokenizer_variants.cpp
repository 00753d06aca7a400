#include "tokenizer/tokenizer_variants.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "spark/error.h"
#include "util/text_file.h"

namespace spark {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

ordered_json split(const char* regex, const char* behavior) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", false}};
}

ordered_json byte_level_pre(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

// Sets the flags of the added tokens whose content is listed.
void set_flag(ordered_json& added, const char* flag, std::initializer_list<const char*> contents) {
  for (auto& t : added) {
    for (const char* c : contents) {
      if (t["content"] == c) t[flag] = true;
    }
  }
}

// The tokenizer.json as an ordered object with a vocabulary in id order. ordered_json parses an object
// with a linear search per key, quadratic on a real 131072-entry vocabulary, so the file is parsed
// unordered and its keys are put back in Hugging Face's order.
ordered_json parse_in_order(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("tokenizer variant: tokenizer.json is not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    throw Error("tokenizer variant: tokenizer.json has no model");
  ordered_json out = ordered_json::object();
  for (const char* key : {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                          "post_processor", "decoder"}) {
    if (j.contains(key)) out[key] = ordered_json::parse(j[key].dump());
  }
  json& model = j["model"];
  ordered_json m = ordered_json::object();
  for (const char* key : {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                          "fuse_unk", "byte_fallback", "ignore_merges"}) {
    if (model.contains(key)) m[key] = ordered_json::parse(model[key].dump());
  }
  for (auto& [key, value] : model.items()) {
    if (key != "vocab" && key != "merges" && !m.contains(key)) m[key] = ordered_json::parse(value.dump());
  }
  std::vector<std::pair<int64_t, std::string>> entries;
  for (auto& [token, id] : model["vocab"].items()) entries.emplace_back(id.get<int64_t>(), token);
  std::sort(entries.begin(), entries.end());
  ordered_json vocab = ordered_json::object();
  auto& list = vocab.get_ref<ordered_json::object_t&>();
  list.reserve(entries.size());
  for (auto& [id, token] : entries)
    list.ordered_json::object_t::Container::emplace_back(std::move(token), id);
  m["vocab"] = std::move(vocab);
  m["merges"] = ordered_json::parse(model["merges"].dump());
  out["model"] = std::move(m);
  return out;
}

}  // namespace

const std::vector<std::string>& tokenizer_variant_names() {
  static const std::vector<std::string> names = {"default",        "null-normalizer",  "nfc",
                                                 "nfkc-lowercase", "added-normalized", "added-strip",
                                                 "gpt2-bytelevel", "split-removed",    "punct-whitespace",
                                                 "decoders",       "template-post"};
  return names;
}

bool tokenizer_variant_round_trips(const std::string& name) {
  for (const char* n : {"default", "null-normalizer", "decoders", "template-post"}) {
    if (name == n) return true;
  }
  return false;
}

std::string tokenizer_variant_json(const std::string& tokenizer_json, const std::string& name) {
  const auto& names = tokenizer_variant_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw Error("unknown tokenizer variant '" + name + "' (known: " + list + ")");
  }
  ordered_json t = parse_in_order(tokenizer_json);
  ordered_json& added = t["added_tokens"];
  const ordered_json empty_sequence = {{"type", "Sequence"}, {"normalizers", ordered_json::array()}};
  t["normalizer"] = empty_sequence;
  if (name == "null-normalizer") {
    t["normalizer"] = nullptr;
  } else if (name == "nfc") {
    t["normalizer"] = {{"type", "NFC"}};
  } else if (name == "nfkc-lowercase") {
    t["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}};
  } else if (name == "added-normalized") {
    // Lowercased text, and non-special added tokens matched on it: "<THINK>" is <think>.
    t["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}}}};
    for (auto& tok : added) {
      if (!tok["special"].get<bool>()) tok["normalized"] = true;
    }
  } else if (name == "added-strip") {
    set_flag(added, "lstrip", {"<think>", "<|User|>", "<tool_call>", "<arg_key>", "<|fim_prefix|>"});
    set_flag(added, "rstrip", {"</think>", "<|Bot|>", "</tool_call>", "<arg_key>", "<|fim_suffix|>"});
    set_flag(added, "single_word", {"<arg_value>", "</arg_value>"});
  } else if (name == "gpt2-bytelevel") {
    t["pre_tokenizer"] = byte_level_pre(true, true);
  } else if (name == "split-removed") {
    t["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {split(R"(\s+)", "Removed"), split(R"(\p{N}{1,3})", "Isolated"), byte_level_pre(false, true)}}};
  } else if (name == "punct-whitespace") {
    t["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "WhitespaceSplit"}},
                            {{"type", "Punctuation"}, {"behavior", "Isolated"}},
                            {{"type", "Whitespace"}},
                            byte_level_pre(false, false)}}};
  } else if (name == "decoders") {
    // Replace and Strip that never apply to this vocabulary's tokens, so decoding stays exact: U+2400
    // is in no token, and the one string ByteLevel leaves is stripped of zero characters.
    t["decoder"] = {
        {"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x90\x80"}}}, {"content", " "}},
          {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 0}}}}};
  } else if (name == "template-post") {
    // A BOS before the text when special tokens are asked for.
    std::string bos;
    for (const auto& tok : added) {
      if (tok["id"] == 0) bos = tok["content"].get<std::string>();
    }
    if (bos.empty()) throw Error("tokenizer variant template-post: no added token with id 0 (the BOS)");
    t["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {0}}, {"tokens", {bos}}}}}}};
  }
  return t.dump(2);
}

void write_tokenizer_variant(const std::filesystem::path& dir, const std::string& name) {
  const auto tok_path = dir / "tokenizer.json";
  const std::string text = tokenizer_variant_json(read_text_file(tok_path), name);
  write_text_file(tok_path, text + "\n");
  // tokenizer_config.json lists the added tokens again: keep its flags those of tokenizer.json.
  const auto config_path = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) return;
  ordered_json config = ordered_json::parse(read_text_file(config_path));
  const json tok = json::parse(text);
  if (auto d = config.find("added_tokens_decoder"); d != config.end() && d->is_object()) {
    for (const auto& a : tok["added_tokens"]) {
      const std::string id = std::to_string(a["id"].get<int64_t>());
      if (!d->contains(id)) continue;
      for (const char* flag : {"lstrip", "rstrip", "single_word", "normalized", "special"})
        (*d)[id][flag] = a[flag];
    }
  }
  write_text_file(config_path, config.dump(2) + "\n");
}

}  // namespace spark
