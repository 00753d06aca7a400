// tokenizer.json files as a checkpoint ships them (Tokenizer::from_json). The input is the file; when it
// holds a NUL byte (which no valid JSON document contains), the text after the first NUL is encoded with the
// loaded tokenizer too. A malformed or unsupported file must be a spark::Error; a tokenizer that loads must
// encode, decode and answer lookups without crashing, with ids inside its vocabulary.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "spark/error.h"
#include "tokenizer/tokenizer.h"

using spark::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  std::vector<std::string> texts = {"Hello world! 123", " <|im_start|>user\nhi<|im_end|>",
                                    "héllo 世界 🙂\t\n"};
  if (nul != std::string_view::npos) texts.emplace_back(input.substr(nul + 1));

  std::optional<spark::Tokenizer> tok;
  try {
    tok.emplace(spark::Tokenizer::from_json(json, "tokenizer.json"));
  } catch (const spark::Error&) {
    return 0;
  }
  const int32_t vocab = tok->vocab_size();
  check(vocab >= 0, "negative vocab_size");
  // Lookups over the (possibly huge, sparse) id range: the first ids and a few beyond the end.
  for (int32_t id = -2; id < std::min(vocab, 2048) + 2; ++id) {
    if (!tok->contains(id)) continue;
    const std::string token = tok->id_to_token(id);
    (void)tok->token_bytes(id);
    const std::optional<int32_t> back = tok->token_to_id(token);
    check(back.has_value(), "id_to_token not found by token_to_id", token);
  }
  for (const std::string& text : texts) {
    try {
      const std::vector<int32_t> ids = tok->encode(text);
      for (int32_t id : ids) check(tok->contains(id), "encode produced an id outside the vocabulary");
      const std::string decoded = tok->decode(ids);
      check(spark::fuzz::well_formed_utf8(decoded), "decode output not UTF-8");
      (void)tok->decode(ids, true);
      (void)tok->pre_tokenize(text);
    } catch (const spark::Error&) {
      // Text that is not valid UTF-8, or a tokenizer whose model cannot encode it (no byte fallback).
    }
  }
  return 0;
}
