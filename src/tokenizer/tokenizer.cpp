#include "tokenizer/tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "spark/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode_additions.h"
#include "tokenizer/utf8.h"

namespace spark {

namespace {

enum : uint8_t { kPresent = 1, kAdded = 2, kSpecial = 4 };

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json parse_json(std::string_view text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
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

std::vector<std::pair<std::string, int32_t>> parse_vocab(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": the BPE vocab must be an object of token -> id");
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(j.size());
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      throw Error(origin + ": vocab entry '" + token + "' has id " + id.dump() +
                  ", not a non-negative integer");
    }
    vocab.emplace_back(token, id.get<int32_t>());
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

const char* type_name(const nlohmann::json& j) {
  if (j.is_object()) {
    auto it = j.find("type");
    if (it != j.end() && it->is_string()) return it->get_ref<const std::string&>().c_str();
  }
  return "?";
}

}  // namespace

struct Tokenizer::Impl {
  std::string origin;
  PreTokenizer pre;
  AddedTokenMatcher matcher;
  std::unique_ptr<BpeModel> bpe;
  std::vector<AddedToken> added;
  std::vector<std::string> id_bytes;  // what each id decodes to
  std::vector<std::string> id_text;   // the vocabulary entry as written in the file
  std::vector<uint8_t> id_flags;
  std::unordered_map<std::string, int32_t> text_to_id;

  Impl(std::string origin_, PreTokenizer pre_) : origin(std::move(origin_)), pre(std::move(pre_)) {}

  void set_id(int32_t id, const std::string& text, std::string bytes, uint8_t flags) {
    if (static_cast<size_t>(id) >= id_flags.size()) {
      id_bytes.resize(static_cast<size_t>(id) + 1);
      id_text.resize(static_cast<size_t>(id) + 1);
      id_flags.resize(static_cast<size_t>(id) + 1, 0);
    }
    id_text[id] = text;
    id_bytes[id] = std::move(bytes);
    id_flags[id] = flags;
  }
};

static Tokenizer load_tokenizer_json(const nlohmann::json& j, const std::string& origin);

static std::unique_ptr<Tokenizer::Impl> build(std::string origin, PreTokenizer pre, const ModelSpec& model,
                                              std::vector<AddedToken> added) {
  auto impl = std::make_unique<Tokenizer::Impl>(std::move(origin), std::move(pre));
  const std::string& o = impl->origin;

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
    if (byte_level) whole_words[bytes] = id;
    impl->set_id(id, text, bytes, kPresent);
    impl->text_to_id[text] = id;
  }

  std::vector<std::array<int32_t, 3>> merges;
  merges.reserve(model.merges.size());
  for (size_t rank = 0; rank < model.merges.size(); ++rank) {
    const auto& [a, b] = model.merges[rank];
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
    impl->set_id(t.id, t.content, t.content, kPresent | kAdded | (t.special ? kSpecial : 0));
    impl->text_to_id[t.content] = t.id;
  }
  impl->matcher = AddedTokenMatcher(added);
  impl->added = std::move(added);
  return impl;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return from_json(read_file(tokenizer_json), tokenizer_json.string());
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  try {
    return load_tokenizer_json(parse_json(json_text, origin), origin);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type somewhere in the file.
    throw Error(origin + ": " + e.what());
  }
}

static Tokenizer load_tokenizer_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": not a tokenizer.json object");
  if (auto n = j.find("normalizer"); n != j.end() && !n->is_null()) {
    throw Error(origin + ": normalizer '" + type_name(*n) +
                "' is not supported (byte-level BPE without a normalizer)");
  }
  if (auto d = j.find("decoder"); d == j.end() || std::string(type_name(*d)) != "ByteLevel") {
    throw Error(origin + ": decoder must be ByteLevel (byte-level BPE), got '" +
                (d == j.end() ? std::string("none") : std::string(type_name(*d))) + "'");
  }
  PreTokenizer pre = [&] {
    try {
      return PreTokenizer::from_json(j.value("pre_tokenizer", nlohmann::json()));
    } catch (const Error& e) {
      throw Error(origin + ": " + e.what());
    }
  }();

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
          id->get<int64_t>() > INT32_MAX) {
        throw Error(origin + ": an added token has no valid \"id\"");
      }
      added.push_back(parse_added_token(t, id->get<int32_t>(), origin));
    }
  }
  const bool byte_fallback = m->value("byte_fallback", false);
  auto impl = build(origin, std::move(pre), spec, std::move(added));
  if (byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      if (!impl->text_to_id.contains(byte_level::encode(std::string(1, static_cast<char>(b))))) {
        throw Error(origin + ": byte_fallback with an incomplete byte alphabet is not supported");
      }
    }
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_vocab_merges(const std::filesystem::path& vocab_json,
                                       const std::filesystem::path& merges_txt,
                                       std::vector<AddedToken> added_tokens,
                                       std::string_view pre_tokenizer_json) {
  const std::string origin = vocab_json.string();
  ModelSpec spec;
  spec.vocab = parse_vocab(parse_json(read_file(vocab_json), origin), origin);
  std::istringstream lines(read_file(merges_txt));
  std::string line;
  for (size_t n = 0; std::getline(lines, line); ++n) {
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
  if (std::filesystem::exists(dir / "tokenizer.json")) return from_file(dir / "tokenizer.json");
  if (std::filesystem::exists(dir / "vocab.json") && std::filesystem::exists(dir / "merges.txt")) {
    std::vector<AddedToken> added;
    const auto config_path = dir / "tokenizer_config.json";
    if (std::filesystem::exists(config_path)) {
      const nlohmann::json config = parse_json(read_file(config_path), config_path.string());
      if (auto d = config.find("added_tokens_decoder"); d != config.end() && d->is_object()) {
        for (const auto& [key, value] : d->items()) {
          int32_t id = -1;
          try {
            id = std::stoi(key);
          } catch (const std::exception&) {
            throw Error(config_path.string() + ": added_tokens_decoder key '" + key + "' is not an id");
          }
          added.push_back(parse_added_token(value, id, config_path.string()));
        }
      }
    }
    return from_vocab_merges(dir / "vocab.json", dir / "merges.txt", std::move(added));
  }
  throw Error(dir.string() + ": no tokenizer.json (nor vocab.json + merges.txt)");
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& ids) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    throw Error("text to tokenize is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  if (text.size() > UINT32_MAX) throw Error("text to tokenize is larger than 4 GiB");
  thread_local std::vector<TextSegment> segments;
  thread_local std::vector<std::string_view> pieces;
  thread_local PieceArena arena;
  segments.clear();
  arena.clear();
  impl_->matcher.split(text, segments);
  const UnicodeTables tables = has_newer_code_points(text) ? UnicodeTables::kNewer : UnicodeTables::kSystem;
  for (const TextSegment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    pieces.clear();
    impl_->pre.split(text.substr(s.begin, s.end - s.begin), pieces, arena, tables);
    for (std::string_view p : pieces) impl_->bpe->encode_word(p, ids);
  }
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    throw Error("text to tokenize is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  std::vector<std::string_view> pieces;
  PieceArena arena;
  impl_->pre.split(text, pieces, arena,
                   has_newer_code_points(text) ? UnicodeTables::kNewer : UnicodeTables::kSystem);
  return {pieces.begin(), pieces.end()};
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode(text, ids);
  return ids;
}

bool Tokenizer::contains(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() && (impl_->id_flags[id] & kPresent);
}
bool Tokenizer::is_added(int32_t id) const {
  return contains(id) && (impl_->id_flags[id] & kAdded);
}
bool Tokenizer::is_special(int32_t id) const {
  return contains(id) && (impl_->id_flags[id] & kSpecial);
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (!contains(id)) throw Error("token id " + std::to_string(id) + " is not in the vocabulary");
  return impl_->id_bytes[id];
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    const std::string_view bytes = token_bytes(id);
    if (skip_special_tokens && is_special(id)) continue;
    out.append(bytes);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const std::string bytes = decode_bytes(ids, skip_special_tokens);
  if (utf8::find_invalid(bytes) == std::string::npos) return bytes;
  std::string out;
  utf8::append_lossy(bytes, out);
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->text_to_id.find(std::string(token));
  if (it == impl_->text_to_id.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (!contains(id)) throw Error("token id " + std::to_string(id) + " is not in the vocabulary");
  return impl_->id_text[id];
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->id_flags.size());
}
size_t Tokenizer::num_merges() const {
  return impl_->bpe->num_merges();
}
const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added;
}

}  // namespace spark
