// Loading tokenizer.json, vocab.json + merges.txt and checkpoint folders into a Tokenizer: every
// unsupported or malformed piece is one spark::Error naming the file.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "spark/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/bounded_json.h"
#include "util/text_file.h"

namespace spark {

namespace {

nlohmann::json parse_json(std::string_view text, const std::string& origin) {
  try {
    return parse_json_bounded(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": invalid JSON (" + e.what() + ")");
  }
}

struct ModelSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // entry text -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

// Ids index flat tables; real vocabularies stay far below this.
constexpr int64_t kMaxTokenId = (1 << 24) - 1;

// Takes the entries out of `j` (moving the strings: a real vocabulary has 131072 of them).
std::vector<std::pair<std::string, int32_t>> parse_vocab(nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": the BPE vocab must be an object of token -> id");
  auto& entries = j.get_ref<nlohmann::json::object_t&>();
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(entries.size());
  while (!entries.empty()) {
    auto node = entries.extract(entries.begin());
    const nlohmann::json& id = node.mapped();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId) {
      throw Error(origin + ": vocab entry '" + node.key() + "' has id " + id.dump() +
                  ", not an integer in 0.." + std::to_string(kMaxTokenId));
    }
    vocab.emplace_back(std::move(node.key()), id.get<int32_t>());
  }
  return vocab;
}

std::pair<std::string, std::string> split_merge(const std::string& line, size_t rank,
                                                const std::string& origin) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
    throw Error(origin + ": merge " + std::to_string(rank + 1) + " ('" + line +
                "') is not two tokens separated by one space");
  }
  return {line.substr(0, space), line.substr(space + 1)};
}

AddedToken parse_added_token(const nlohmann::json& j, int32_t id, const std::string& origin) {
  if (!j.is_object() || !j.contains("content") || !j["content"].is_string()) {
    throw Error(origin + ": added token " + std::to_string(id) + " has no \"content\" string");
  }
  auto flag = [&](const char* key, bool fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
  };
  AddedToken t;
  t.id = id;
  t.content = j["content"].get<std::string>();
  t.special = flag("special", false);
  t.single_word = flag("single_word", false);
  t.lstrip = flag("lstrip", false);
  t.rstrip = flag("rstrip", false);
  t.normalized = flag("normalized", !t.special);
  return t;
}

std::unique_ptr<Tokenizer::Impl> build(std::string origin, PreTokenizer pre, const ModelSpec& model,
                                       std::vector<AddedToken> added, Normalizer normalizer = {}) {
  auto impl = std::make_unique<Tokenizer::Impl>(std::move(origin), std::move(pre));
  impl->normalizer = std::move(normalizer);
  const std::string& o = impl->origin;
  int32_t max_id = -1;
  for (const auto& [text, id] : model.vocab) max_id = std::max(max_id, id);
  for (const auto& t : added) max_id = std::max(max_id, t.id);
  impl->id_bytes.resize(static_cast<size_t>(max_id + 1));
  impl->id_text.resize(static_cast<size_t>(max_id + 1));
  impl->id_flags.resize(static_cast<size_t>(max_id + 1), 0);
  impl->text_to_id.reserve(model.vocab.size() + added.size());

  BpeModel::WordMap whole_words;
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  std::string bytes;
  for (const auto& [text, id] : model.vocab) {
    // Entries outside the byte alphabet (added tokens kept in the vocab) decode as their own UTF-8, as
    // the ByteLevel decoder of `tokenizers` does.
    const bool byte_level = byte_level::decode(text, bytes);
    if (!byte_level) bytes = text;
    if (byte_level && bytes.size() == 1) byte_ids[static_cast<unsigned char>(bytes[0])] = id;
    if (byte_level && model.ignore_merges) whole_words[bytes] = id;
    impl->set_id(id, text, bytes, kTokenPresent);
    impl->text_to_id[text] = id;
  }

  std::vector<std::array<int32_t, 3>> merges;
  merges.reserve(model.merges.size());
  for (size_t rank = 0; rank < model.merges.size(); ++rank) {
    // Named references, not a structured binding: clang before 16 cannot capture bindings in a lambda.
    const std::string& a = model.merges[rank].first;
    const std::string& b = model.merges[rank].second;
    auto lookup = [&](const std::string& t) {
      auto it = impl->text_to_id.find(t);
      if (it == impl->text_to_id.end()) {
        throw Error(o + ": merge " + std::to_string(rank + 1) + " ('" + a + " " + b + "'): '" + t +
                    "' is not in the vocabulary");
      }
      return it->second;
    };
    merges.push_back({lookup(a), lookup(b), lookup(a + b)});
  }

  BpeOptions options;
  options.fuse_unk = model.fuse_unk;
  options.ignore_merges = model.ignore_merges;
  if (model.unk_token) {
    auto it = impl->text_to_id.find(*model.unk_token);
    if (it == impl->text_to_id.end())
      throw Error(o + ": unk_token '" + *model.unk_token + "' is not in the vocabulary");
    options.unk_id = it->second;
  }
  impl->bpe = std::make_unique<BpeModel>(byte_ids, merges, std::move(whole_words), options);

  for (auto& t : added) {
    // Like `tokenizers`, an added token already in the vocabulary keeps the vocabulary's id.
    if (auto it = impl->text_to_id.find(t.content); it != impl->text_to_id.end()) t.id = it->second;
    if (t.id < 0) throw Error(o + ": added token '" + t.content + "' has no id");
    if (t.content.empty()) throw Error(o + ": added token " + std::to_string(t.id) + " has empty content");
    impl->set_id(t.id, t.content, t.content, kTokenPresent | kTokenAdded | (t.special ? kTokenSpecial : 0));
    impl->text_to_id[t.content] = t.id;
  }
  impl->matcher = AddedTokenMatcher(added, &impl->normalizer);
  impl->added = std::move(added);
  return impl;
}

// Runs `parse`, putting the file's name in front of any error it throws.
template <typename F>
auto with_origin(const std::string& origin, F&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

std::unique_ptr<Tokenizer::Impl> load_tokenizer_json(nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": not a tokenizer.json object");
  const nlohmann::json none;
  auto field = [&](const char* key) -> const nlohmann::json& {
    auto it = j.find(key);
    return it == j.end() ? none : *it;
  };
  Normalizer normalizer = with_origin(origin, [&] { return Normalizer::from_json(field("normalizer")); });
  Decoder decoder = with_origin(origin, [&] { return Decoder::from_json(field("decoder")); });
  PostProcessor post = with_origin(origin, [&] { return PostProcessor::from_json(field("post_processor")); });
  PreTokenizer pre = with_origin(origin, [&] { return PreTokenizer::from_json(field("pre_tokenizer")); });

  const auto m = j.find("model");
  if (m == j.end() || !m->is_object()) throw Error(origin + ": no \"model\" object");
  const std::string type = m->value("type", std::string("BPE"));
  if (type != "BPE") throw Error(origin + ": model type '" + type + "' is not supported (only BPE)");
  if (auto d = m->find("dropout"); d != m->end() && !d->is_null() && d->get<double>() != 0.0) {
    throw Error(origin + ": BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto f = m->find(key);
        f != m->end() && !f->is_null() && !(f->is_string() && f->get<std::string>().empty())) {
      throw Error(origin + ": BPE " + key + " is not supported (byte-level BPE has none)");
    }
  }
  ModelSpec spec;
  if (!m->contains("vocab")) throw Error(origin + ": the BPE model has no vocab");
  spec.vocab = parse_vocab((*m)["vocab"], origin);
  if (auto u = m->find("unk_token"); u != m->end() && u->is_string()) spec.unk_token = u->get<std::string>();
  spec.fuse_unk = m->value("fuse_unk", false);
  spec.ignore_merges = m->value("ignore_merges", false);
  const auto merges = m->find("merges");
  if (merges == m->end() || !merges->is_array()) throw Error(origin + ": the BPE model has no merges list");
  spec.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const auto& e = (*merges)[i];
    if (e.is_string()) {
      spec.merges.push_back(split_merge(e.get<std::string>(), i, origin));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      throw Error(origin + ": merge " + std::to_string(i + 1) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }

  std::vector<AddedToken> added;
  if (auto a = j.find("added_tokens"); a != j.end() && !a->is_null()) {
    if (!a->is_array()) throw Error(origin + ": added_tokens must be a list");
    for (const auto& t : *a) {
      const auto id = t.find("id");
      if (id == t.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
          id->get<int64_t>() > kMaxTokenId) {
        throw Error(origin + ": an added token has no valid \"id\"");
      }
      added.push_back(parse_added_token(t, id->get<int32_t>(), origin));
    }
  }
  const bool byte_fallback = m->value("byte_fallback", false);
  auto impl = build(origin, std::move(pre), spec, std::move(added), std::move(normalizer));
  impl->decoder = std::move(decoder);
  for (int32_t id : post.prefix) {
    if (static_cast<size_t>(id) >= impl->id_flags.size() || !(impl->id_flags[id] & kTokenPresent))
      throw Error(origin + ": post_processor token id " + std::to_string(id) + " is not in the vocabulary");
  }
  for (int32_t id : post.suffix) {
    if (static_cast<size_t>(id) >= impl->id_flags.size() || !(impl->id_flags[id] & kTokenPresent))
      throw Error(origin + ": post_processor token id " + std::to_string(id) + " is not in the vocabulary");
  }
  impl->post = std::move(post);
  if (byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      if (!impl->text_to_id.contains(byte_level::encode(std::string(1, static_cast<char>(b))))) {
        throw Error(origin + ": byte_fallback with an incomplete byte alphabet is not supported");
      }
    }
  }
  return impl;
}

// bos_token / eos_token of a tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

// add_bos_token / add_eos_token of tokenizer_config.json: when either is true, add_special_tokens puts
// exactly those tokens around the text, as transformers rebuilds the post-processor from them.
void apply_config_special_tokens(Tokenizer::Impl& impl, const nlohmann::json& config,
                                 const std::string& origin) {
  auto flag = [&](const char* key) {
    auto it = config.find(key);
    return it != config.end() && it->is_boolean() && it->get<bool>();
  };
  const bool add_bos = flag("add_bos_token"), add_eos = flag("add_eos_token");
  if (!add_bos && !add_eos) return;
  auto id_of = [&](const char* key) {
    const auto token = config_token(config, key);
    if (!token) throw Error(origin + ": add_" + std::string(key) + " is true but there is no " + key);
    auto it = impl.text_to_id.find(*token);
    if (it == impl.text_to_id.end())
      throw Error(origin + ": " + key + " '" + *token + "' is not in the vocabulary");
    return it->second;
  };
  PostProcessor post;
  if (add_bos) post.prefix.push_back(id_of("bos_token"));
  if (add_eos) post.suffix.push_back(id_of("eos_token"));
  impl.post = std::move(post);
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return from_json(read_text_file(tokenizer_json), tokenizer_json.string());
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  try {
    nlohmann::json j = parse_json(json_text, origin);
    return Tokenizer(load_tokenizer_json(j, origin));
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type somewhere in the file.
    throw Error(origin + ": " + e.what());
  }
}

Tokenizer Tokenizer::from_vocab_merges(const std::filesystem::path& vocab_json,
                                       const std::filesystem::path& merges_txt,
                                       std::vector<AddedToken> added_tokens,
                                       std::string_view pre_tokenizer_json) {
  const std::string origin = vocab_json.string();
  ModelSpec spec;
  nlohmann::json vocab = parse_json(read_text_file(vocab_json), origin);
  spec.vocab = parse_vocab(vocab, origin);
  std::istringstream lines(read_text_file(merges_txt));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with("#version") || line.empty()) continue;
    spec.merges.push_back(split_merge(line, spec.merges.size(), merges_txt.string()));
  }
  const std::string pre_text =
      pre_tokenizer_json.empty() ? spark_pre_tokenizer_json() : std::string(pre_tokenizer_json);
  PreTokenizer pre = [&] {
    try {
      return PreTokenizer::from_json(parse_json(pre_text, "pre-tokenizer"));
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("pre_tokenizer: ") + e.what());
    }
  }();
  return Tokenizer(build(origin, std::move(pre), spec, std::move(added_tokens)));
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "tokenizer.json")) {
    Tokenizer tok = from_file(dir / "tokenizer.json");
    const auto config_path = dir / "tokenizer_config.json";
    if (std::filesystem::exists(config_path)) {
      const nlohmann::json config = parse_json(read_text_file(config_path), config_path.string());
      if (config.is_object()) apply_config_special_tokens(*tok.impl_, config, config_path.string());
    }
    return tok;
  }
  if (std::filesystem::exists(dir / "vocab.json") && std::filesystem::exists(dir / "merges.txt")) {
    std::vector<AddedToken> added;
    const auto config_path = dir / "tokenizer_config.json";
    nlohmann::json config;
    if (std::filesystem::exists(config_path)) {
      config = parse_json(read_text_file(config_path), config_path.string());
      if (auto d = config.find("added_tokens_decoder"); d != config.end() && d->is_object()) {
        for (const auto& [key, value] : d->items()) {
          int64_t id = -1;
          try {
            id = std::stoll(key);
          } catch (const std::exception&) {
            id = -1;
          }
          if (id < 0 || id > kMaxTokenId || std::to_string(id) != key) {
            throw Error(config_path.string() + ": added_tokens_decoder key '" + key + "' is not a token id");
          }
          added.push_back(parse_added_token(value, static_cast<int32_t>(id), config_path.string()));
        }
      }
    }
    Tokenizer tok = from_vocab_merges(dir / "vocab.json", dir / "merges.txt", std::move(added));
    if (config.is_object()) apply_config_special_tokens(*tok.impl_, config, config_path.string());
    return tok;
  }
  throw Error(dir.string() + ": no tokenizer.json (nor vocab.json + merges.txt)");
}

}  // namespace spark
