// Added tokens (special or not) are cut out of the text before pre-tokenization, as Hugging Face
// tokenizers do: leftmost-longest exact matching, first the tokens marked `normalized: false` over the
// raw text, then (after the normalizer has run on every piece left) the `normalized: true` ones, by
// their normalized content, over the normalized pieces, with the lstrip / rstrip / single_word options
// applied to each match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace spark {

class Normalizer;

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
  // `normalizer`, when given, turns the content of the `normalized: true` tokens into what they match.
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens, const Normalizer* normalizer = nullptr);

  // Both passes over `text` (valid UTF-8) with no normalizer in between: added tokens and the text
  // between them, in order; empty text segments are left out.
  void split(std::string_view text, std::vector<TextSegment>& out) const;
  // The first pass alone, on raw text: the `normalized: false` tokens.
  void split_raw(std::string_view text, std::vector<TextSegment>& out) const;
  // The second pass alone, on a normalized piece: the `normalized: true` tokens.
  void split_normalized(std::string_view text, std::vector<TextSegment>& out) const;

  bool empty() const { return tokens_.empty(); }
  bool has_normalized() const { return normalized_.nodes.size() > 1; }

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
  void add_to_trie(Trie& trie, std::string_view key, int32_t index);
  // Longest token of `trie` starting at `pos`: its index, or -1; `length` gets its byte length.
  int32_t longest_at(const Trie& trie, std::string_view text, size_t pos, size_t& length) const;
  void split_pass(const Trie& trie, std::string_view text, uint32_t base,
                  std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> keys_;  // what each token matches: its content, normalized when it is normalized
  Trie plain_;                     // normalized: false
  Trie normalized_;                // normalized: true, keyed by their normalized content
  Regex word_char_;
};

}  // namespace spark
