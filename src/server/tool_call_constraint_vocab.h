// The vocabulary as the tool-call constraint sees it: each token's text as bytes, in a trie so that one walk
// per step decides every token at once (tokens sharing a prefix share the work, and a prefix the automaton
// rejects discards everything below it). Built once per model and shared by all requests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spark {

class TokenTrie {
 public:
  TokenTrie() = default;
  // Indexes the given tokens (non-empty texts only) of `texts`.
  TokenTrie(const std::vector<std::string>& texts, const std::vector<int32_t>& ids);

  static constexpr uint32_t kRoot = 0;
  uint32_t edges_begin(uint32_t node) const { return edge_offset_[node]; }
  uint32_t edges_end(uint32_t node) const { return edge_offset_[node + 1]; }
  uint8_t edge_byte(uint32_t edge) const { return edge_byte_[edge]; }
  uint32_t edge_child(uint32_t edge) const { return edge_child_[edge]; }
  uint32_t tokens_begin(uint32_t node) const { return token_offset_[node]; }
  uint32_t tokens_end(uint32_t node) const { return token_offset_[node + 1]; }
  int32_t token(uint32_t i) const { return tokens_[i]; }
  size_t node_count() const { return edge_offset_.empty() ? 0 : edge_offset_.size() - 1; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<uint32_t> edge_offset_;  // per node, into edge_byte_/edge_child_ (children in byte order)
  std::vector<uint8_t> edge_byte_;
  std::vector<uint32_t> edge_child_;
  std::vector<uint32_t> token_offset_;  // per node, into tokens_ (tokens whose text ends there)
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;
};

class ConstraintVocab {
 public:
  static constexpr uint16_t kIrregular = 0xFFFF;

  // token_texts[id]: the bytes the token decodes to (byte-level, no replacement of partial UTF-8; special and
  // added tokens as their text, e.g. "<tool_call>"). end_ids: tokens that end generation (EOS); they are
  // allowed exactly when the call is complete. Tokens with empty text are never allowed.
  ConstraintVocab(std::vector<std::string> token_texts, std::vector<int32_t> end_ids);

  size_t size() const { return texts_.size(); }
  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  bool is_end(int32_t id) const { return is_end_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }

  // Every token with text.
  const TokenTrie& all() const { return all_; }
  // For text inside a `<arg_value>` string / a JSON string: a "plain" token is whole UTF-8 characters
  // without `<` (and, for JSON, without `"`, `\` or control bytes); its entry is the offset of its last
  // character, which is all the length limit needs. Other tokens are kIrregular and sit in the trie.
  const std::vector<uint16_t>& raw_plain() const { return raw_plain_; }
  const std::vector<uint16_t>& json_plain() const { return json_plain_; }
  const TokenTrie& raw_irregular() const { return raw_irregular_; }
  const TokenTrie& json_irregular() const { return json_irregular_; }

 private:
  std::vector<std::string> texts_;
  std::vector<int32_t> end_ids_;
  std::vector<uint8_t> is_end_;
  std::vector<uint16_t> raw_plain_;
  std::vector<uint16_t> json_plain_;
  TokenTrie all_;
  TokenTrie raw_irregular_;
  TokenTrie json_irregular_;
};

}  // namespace spark
