// Added tokens (special or not) are cut out of the text before pre-tokenization, as Hugging Face
// tokenizers do: leftmost-longest exact matching, first the tokens marked `normalized: false` over the
// whole text, then the `normalized: true` ones over what is left, with the lstrip / rstrip /
// single_word options applied to each match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace spark {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

struct TextSegment {
  uint32_t begin;
  uint32_t end;
  int32_t id;  // the added token's id, or -1 for text that still needs pre-tokenizing
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Splits `text` (valid UTF-8) into added tokens and the text between them, in order; empty text
  // segments are left out.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  bool empty() const { return tokens_.empty(); }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // few children per node: linear scan
    int32_t token = -1;                                       // index into tokens_ when a token ends here
  };
  struct Trie {
    std::vector<Node> nodes;
    bool first_byte[256] = {};
  };

  void build(Trie& trie, bool normalized);
  // Longest token of `trie` starting at `pos`: its index, or -1; `length` gets its byte length.
  int32_t longest_at(const Trie& trie, std::string_view text, size_t pos, size_t& length) const;
  void split_pass(const Trie& trie, std::string_view text, uint32_t base,
                  std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie plain_;       // normalized: false
  Trie normalized_;  // normalized: true (no normalizer is supported, so only the pass order differs)
  Regex word_char_;
};

}  // namespace spark
