// The pre-tokenizer of a byte-level BPE tokenizer.json: a sequence of steps, each splitting every piece
// the previous step produced (Split on a regex or a literal with one of Hugging Face's delimiter
// behaviors, Digits, Punctuation, Whitespace, WhitespaceSplit, and the final ByteLevel step), mirroring
// the `tokenizers` library piece for piece.
#pragma once

#include <deque>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace spark {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Strings created by a step (ByteLevel's prefix space) live here so pieces can stay string_views.
using PieceArena = std::deque<std::string>;

class PreTokenizerStep {
 public:
  virtual ~PreTokenizerStep() = default;
  // Appends the pieces `piece` splits into (never empty ones) to `out`; `tables` as for Regex.
  virtual void split(std::string_view piece, std::vector<std::string_view>& out, PieceArena& arena,
                     UnicodeTables tables) const = 0;
};

// Splits on every match of a pattern (regex, or a literal string) with a delimiter behavior; `invert`
// swaps matches and the gaps between them.
class SplitStep : public PreTokenizerStep {
 public:
  SplitStep(Regex pattern, SplitBehavior behavior, bool invert);
  void split(std::string_view piece, std::vector<std::string_view>& out, PieceArena& arena,
             UnicodeTables tables) const override;

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Every numeric character (\p{N}) its own piece, or runs of them one piece.
class DigitsStep : public PreTokenizerStep {
 public:
  explicit DigitsStep(bool individual_digits);
  void split(std::string_view piece, std::vector<std::string_view>& out, PieceArena& arena,
             UnicodeTables tables) const override;

 private:
  bool individual_;
  Regex numeric_;
};

// Optional leading space on every piece that lacks one, then optionally GPT-2's split regex. The
// byte-to-character mapping itself is implicit: the BPE model works on raw bytes.
class ByteLevelStep : public PreTokenizerStep {
 public:
  ByteLevelStep(bool add_prefix_space, bool use_regex);
  void split(std::string_view piece, std::vector<std::string_view>& out, PieceArena& arena,
             UnicodeTables tables) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitStep> gpt2_split_;  // null when use_regex is false
};

class PreTokenizer {
 public:
  // From a tokenizer.json "pre_tokenizer" value. Throws spark::Error for steps that are not supported
  // or when there is no ByteLevel step last (the tokenizer would not be byte-level).
  static PreTokenizer from_json(const nlohmann::json& config);

  // Splits `text` (valid UTF-8) into pieces, appended to `pieces` as views into `text` or `arena`.
  // UnicodeTables::kSystem is faster and only valid when has_newer_code_points(text) is false.
  void split(std::string_view text, std::vector<std::string_view>& pieces, PieceArena& arena,
             UnicodeTables tables = UnicodeTables::kNewer) const;

 private:
  std::vector<std::unique_ptr<PreTokenizerStep>> steps_;
};

// GPT-2's pre-tokenizer regex (the one ByteLevel applies when use_regex is true).
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Spark-X2.5's pre-tokenizer as tokenizer.json writes it (a "pre_tokenizer" value): used for
// generated checkpoints and for vocab.json + merges.txt folders, which carry no pre-tokenizer.
std::string spark_pre_tokenizer_json();

}  // namespace spark
