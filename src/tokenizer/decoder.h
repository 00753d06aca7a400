// The decoder of a byte-level tokenizer.json ("decoder" value): ByteLevel, or a Sequence of ByteLevel
// with Replace, Strip and Fuse steps, applied as Hugging Face `tokenizers` does to the list of token
// strings (vocabulary entries as the file writes them, added tokens' contents).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace spark {

class DecoderStep {
 public:
  virtual ~DecoderStep() = default;
  // Hugging Face's decode_chain: the token strings in, the (possibly fewer) strings out.
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

class Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;

  // From a tokenizer.json "decoder" value. Throws spark::Error for decoders that are not supported or
  // that have no ByteLevel step (the text of byte-level tokens would not be their bytes).
  static Decoder from_json(const nlohmann::json& config);
  // A lone ByteLevel decoder (for vocab.json + merges.txt folders, which carry none).
  static Decoder byte_level();

  // True for a lone ByteLevel decoder: the text is the tokens' bytes, UTF-8 repaired, and the
  // tokenizer decodes without building token strings.
  bool is_plain_byte_level() const { return plain_byte_level_; }

  // The decoded text of the token strings.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<std::unique_ptr<DecoderStep>> steps_;
  bool plain_byte_level_ = false;
};

}  // namespace spark
