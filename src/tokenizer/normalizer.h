// The normalizer of a tokenizer.json ("normalizer" value): Sequence, NFC/NFD/NFKC/NFKD, Lowercase, Strip,
// Replace, Prepend, as Hugging Face `tokenizers` applies them to every piece of text between the added
// tokens that are matched on raw text. A null normalizer and a Sequence of nothing are no-ops, and
// is_noop() lets the encoder skip them without copying the text.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

class NormalizerStep {
 public:
  virtual ~NormalizerStep() = default;
  // Replaces `text` (valid UTF-8) by its normalized form; `scratch` is a buffer the step may use.
  virtual void apply(std::string& text, std::string& scratch) const = 0;
};

class Normalizer {
 public:
  Normalizer();
  ~Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;

  // From a tokenizer.json "normalizer" value (null allowed). Throws spark::Error naming the normalizer
  // for one that is not supported or malformed.
  static Normalizer from_json(const nlohmann::json& config);

  bool is_noop() const { return steps_.empty(); }

  // The normalized form of `text` (valid UTF-8) in `out`.
  void normalize(std::string_view text, std::string& out) const;
  std::string normalize(std::string_view text) const;

 private:
  std::vector<std::unique_ptr<NormalizerStep>> steps_;
};

// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_unicode_white_space(uint32_t cp);

}  // namespace spark
