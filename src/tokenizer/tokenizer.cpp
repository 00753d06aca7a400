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

namespace {

UnicodeTables tables_for(std::string_view text) {
  return has_newer_code_points(text) ? UnicodeTables::kNewer : UnicodeTables::kSystem;
}

}  // namespace

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& ids, bool add_special_tokens) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    throw Error("text to tokenize is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  if (text.size() > UINT32_MAX) throw Error("text to tokenize is larger than 4 GiB");
  thread_local std::vector<TextSegment> segments, inner;
  thread_local std::vector<std::string_view> pieces;
  thread_local PieceArena arena;
  thread_local std::string normalized;
  segments.clear();
  arena.clear();
  if (add_special_tokens) ids.insert(ids.end(), impl_->post.prefix.begin(), impl_->post.prefix.end());
  // Pre-tokenizes and BPE-merges the text segments of `s` (views into `whole`), passes added tokens on.
  auto encode_segments = [&](std::string_view whole, const std::vector<TextSegment>& segs) {
    const UnicodeTables tables = tables_for(whole);
    for (const TextSegment& s : segs) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      pieces.clear();
      impl_->pre.split(whole.substr(s.begin, s.end - s.begin), pieces, arena, tables);
      for (std::string_view p : pieces) impl_->bpe->encode_word(p, ids);
    }
  };
  if (impl_->normalizer.is_noop()) {
    // No copy of the text: both added-token passes run on it directly.
    impl_->matcher.split(text, segments);
    encode_segments(text, segments);
  } else {
    impl_->matcher.split_raw(text, segments);
    for (const TextSegment& s : segments) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      impl_->normalizer.normalize(text.substr(s.begin, s.end - s.begin), normalized);
      inner.clear();
      impl_->matcher.split_normalized(normalized, inner);
      encode_segments(normalized, inner);
      arena.clear();  // pieces of this segment are BPE-merged already
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), impl_->post.suffix.begin(), impl_->post.suffix.end());
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

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  encode(text, ids, add_special_tokens);
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
  if (!impl_->decoder.is_plain_byte_level()) {
    // The decoder's steps work on the token strings, as Hugging Face's decode_chain does.
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      if (!contains(id)) throw Error("token id " + std::to_string(id) + " is not in the vocabulary");
      if (skip_special_tokens && is_special(id)) continue;
      tokens.push_back(impl_->id_text[id]);
    }
    return impl_->decoder.decode(std::move(tokens));
  }
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
const std::vector<int32_t>& Tokenizer::special_prefix() const {
  return impl_->post.prefix;
}
const std::vector<int32_t>& Tokenizer::special_suffix() const {
  return impl_->post.suffix;
}

}  // namespace spark
