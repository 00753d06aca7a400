// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (or vocab.json + merges.txt).
// Encoding matches `tokenizers`' encode(text, add_special_tokens): added tokens marked normalized:false
// are cut out of the raw text first, the rest is normalized, the normalized:true added tokens are cut
// out of that, and what is left is pre-tokenized, BPE-merged and mapped to the ids of the file; with
// add_special_tokens the post-processor's special tokens (e.g. a BOS) are put around the ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"

namespace spark {

class Tokenizer {
 public:
  // tokenizer.json. Throws spark::Error naming the file for anything malformed or unsupported.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // The text of a tokenizer.json; `origin` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");
  // GPT-2-style files. They carry no pre-tokenizer: `pre_tokenizer_json` gives one (a tokenizer.json
  // "pre_tokenizer" value), empty means Spark's.
  static Tokenizer from_vocab_merges(const std::filesystem::path& vocab_json,
                                     const std::filesystem::path& merges_txt,
                                     std::vector<AddedToken> added_tokens = {},
                                     std::string_view pre_tokenizer_json = {});
  // A checkpoint folder: tokenizer.json, else vocab.json + merges.txt with the added tokens listed in
  // tokenizer_config.json's added_tokens_decoder and Spark's pre-tokenizer. A tokenizer_config.json with
  // add_bos_token / add_eos_token true makes add_special_tokens put its bos_token / eos_token around
  // the ids (as transformers' fast tokenizers rebuild the post-processor), instead of the file's
  // post-processor.
  static Tokenizer from_model_dir(const std::filesystem::path& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Encoding is thread-safe. Throws spark::Error when `text` is not valid UTF-8. Without
  // add_special_tokens nothing (no BOS/EOS) is added: chat templates write those themselves.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Appends to `ids`.
  void encode(std::string_view text, std::vector<int32_t>& ids, bool add_special_tokens = false) const;

  // The pre-tokenizer's pieces of `text` (raw bytes), with no added tokens cut out first: what
  // `tokenizers`' pre_tokenizer.pre_tokenize_str gives, for inspecting and testing the pre-tokenizer.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // Text of the ids through the file's decoder (ByteLevel, or a Sequence with Replace/Strip/Fuse),
  // invalid UTF-8 replaced by U+FFFD as Hugging Face does. Throws spark::Error for an id that is not in
  // the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The raw bytes (every token's bytes as ByteLevel decodes them, whatever the decoder's other steps),
  // without UTF-8 repair.
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Bytes one id stands for: an added token's content, else the vocabulary entry's bytes. Throws
  // spark::Error for an id that is not in the vocabulary.
  std::string_view token_bytes(int32_t id) const;
  bool contains(int32_t id) const;
  bool is_added(int32_t id) const;
  bool is_special(int32_t id) const;  // an added token marked special (skipped by skip_special_tokens)
  // Id of a vocabulary entry as the file writes it (byte-level text, e.g. "Ġthe"), or of an added token.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary entry as the file writes it (an added token's content for added tokens).
  std::string id_to_token(int32_t id) const;
  // Highest id + 1.
  int32_t vocab_size() const;
  size_t num_merges() const;
  const std::vector<AddedToken>& added_tokens() const;
  // The ids add_special_tokens puts before and after the text.
  const std::vector<int32_t>& special_prefix() const;
  const std::vector<int32_t>& special_suffix() const;

  struct Impl;  // opaque (tokenizer_impl.h); public so the loader's helpers can build one
  explicit Tokenizer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace spark
