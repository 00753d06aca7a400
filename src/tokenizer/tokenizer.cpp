#include "tokenizer/tokenizer.h"

#include "spark/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_additions.h"
#include "tokenizer/utf8.h"

namespace spark {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

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
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() && (impl_->id_flags[id] & kTokenPresent);
}
bool Tokenizer::is_added(int32_t id) const {
  return contains(id) && (impl_->id_flags[id] & kTokenAdded);
}
bool Tokenizer::is_special(int32_t id) const {
  return contains(id) && (impl_->id_flags[id] & kTokenSpecial);
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
