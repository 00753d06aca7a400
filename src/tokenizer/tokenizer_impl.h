// The insides of a Tokenizer, shared by its loader (tokenizer_loader.cpp) and its encode/decode
// (tokenizer.cpp). Not part of the interface.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace spark {

enum TokenFlags : uint8_t { kTokenPresent = 1, kTokenAdded = 2, kTokenSpecial = 4 };

struct Tokenizer::Impl {
  std::string origin;
  Normalizer normalizer;  // no-op unless the file has one
  PreTokenizer pre;
  AddedTokenMatcher matcher;  // built after `normalizer`: it normalizes the normalized tokens' content
  Decoder decoder = Decoder::byte_level();
  PostProcessor post;  // what add_special_tokens puts around the ids
  std::unique_ptr<BpeModel> bpe;
  std::vector<AddedToken> added;
  std::vector<std::string> id_bytes;  // what each id decodes to
  std::vector<std::string> id_text;   // the vocabulary entry as written in the file
  std::vector<uint8_t> id_flags;
  std::unordered_map<std::string, int32_t> text_to_id;

  Impl(std::string origin_, PreTokenizer pre_) : origin(std::move(origin_)), pre(std::move(pre_)) {}

  // The tables are sized to the highest id before the first call.
  void set_id(int32_t id, const std::string& text, std::string bytes, uint8_t flags) {
    id_text[id] = text;
    id_bytes[id] = std::move(bytes);
    id_flags[id] = flags;
  }
};

}  // namespace spark
