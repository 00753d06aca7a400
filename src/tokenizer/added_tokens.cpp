#include "tokenizer/added_tokens.h"

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace spark {

namespace {

uint32_t code_point_at(std::string_view s, size_t pos, size_t& length) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  length = utf8::step(p, s.size() - pos).length;
  return utf8::decode(p, length);
}

// Start of the code point that ends at `end`.
size_t previous_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

// The regex crate's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
AddedTokenMatcher::AddedTokenMatcher() : word_char_(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])") {}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, const Normalizer* normalizer)
    : AddedTokenMatcher() {
  for (const auto& t : tokens) {
    if (t.content.empty()) continue;
    std::string key = t.normalized && normalizer != nullptr ? normalizer->normalize(t.content) : t.content;
    if (key.empty()) continue;  // normalized away: it can never match
    tokens_.push_back(t);
    keys_.push_back(std::move(key));
  }
  build(plain_, false);
  build(normalized_, true);
}

void AddedTokenMatcher::add_to_trie(Trie& trie, std::string_view key, int32_t index) {
  int32_t node = 0;
  for (unsigned char c : key) {
    int32_t child = -1;
    for (const auto& [byte, i] : trie.nodes[node].children) {
      if (byte == c) child = i;
    }
    if (child < 0) {
      child = static_cast<int32_t>(trie.nodes.size());
      trie.nodes[node].children.emplace_back(c, child);
      trie.nodes.push_back(Node{});
    }
    node = child;
  }
  // A key listed twice keeps its first entry.
  if (trie.nodes[node].token < 0) trie.nodes[node].token = index;
  trie.first_byte[static_cast<unsigned char>(key[0])] = true;
}

void AddedTokenMatcher::build(Trie& trie, bool normalized) {
  trie.nodes.assign(1, Node{});
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].normalized == normalized) add_to_trie(trie, keys_[i], static_cast<int32_t>(i));
  }
}

int32_t AddedTokenMatcher::longest_at(const Trie& trie, std::string_view text, size_t pos,
                                      size_t& length) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    int32_t child = -1;
    for (const auto& [byte, index] : trie.nodes[node].children) {
      if (byte == c) {
        child = index;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    if (trie.nodes[node].token >= 0) {
      best = trie.nodes[node].token;
      length = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split_pass(const Trie& trie, std::string_view text, uint32_t base,
                                   std::vector<TextSegment>& out) const {
  size_t start_offset = 0;  // end of the previous accepted match
  size_t pos = 0;           // where the next search starts
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t length = 0;
    const int32_t index = longest_at(trie, text, pos, length);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos, stop = pos + length;
    pos = stop;  // matches never overlap, even when one is discarded below
    if (token.single_word) {
      Span m{};
      const size_t before = start == 0 ? 0 : previous_start(text, start);
      const bool start_space = start == 0 || !word_char_.search(text.substr(before, start - before), 0, m);
      size_t len = 0;
      if (stop < text.size()) code_point_at(text, stop, len);
      const bool stop_space = stop == text.size() || !word_char_.search(text.substr(stop, len), 0, m);
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        const size_t p = previous_start(text, s);
        size_t len = 0;
        if (!is_unicode_white_space(code_point_at(text, p, len))) break;
        s = p;
      }
      start = s;
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t len = 0;
        if (!is_unicode_white_space(code_point_at(text, stop, len))) break;
        stop += len;
      }
      pos = stop;
    }
    if (start_offset < start) {
      out.push_back({base + static_cast<uint32_t>(start_offset), base + static_cast<uint32_t>(start), -1});
    }
    out.push_back({base + static_cast<uint32_t>(start), base + static_cast<uint32_t>(stop), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    out.push_back(
        {base + static_cast<uint32_t>(start_offset), base + static_cast<uint32_t>(text.size()), -1});
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({0, static_cast<uint32_t>(text.size()), -1});
    return;
  }
  thread_local std::vector<TextSegment> first;
  first.clear();
  split_pass(plain_, text, 0, first);
  for (const TextSegment& s : first) {
    if (s.id >= 0 || !has_normalized()) {
      out.push_back(s);
    } else {
      split_pass(normalized_, text.substr(s.begin, s.end - s.begin), s.begin, out);
    }
  }
}

void AddedTokenMatcher::split_raw(std::string_view text, std::vector<TextSegment>& out) const {
  if (plain_.nodes.size() == 1) {
    if (!text.empty()) out.push_back({0, static_cast<uint32_t>(text.size()), -1});
    return;
  }
  split_pass(plain_, text, 0, out);
}

void AddedTokenMatcher::split_normalized(std::string_view text, std::vector<TextSegment>& out) const {
  if (!has_normalized()) {
    if (!text.empty()) out.push_back({0, static_cast<uint32_t>(text.size()), -1});
    return;
  }
  split_pass(normalized_, text, 0, out);
}

}  // namespace spark
