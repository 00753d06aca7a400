// tokenizer.json / tokenizer_config.json for generated checkpoints: byte-level BPE with Spark's
// pre-tokenizer and Spark's added tokens at the same places relative to the vocabulary as in the real
// 131072-entry vocabulary (low ids 0..13, the chat specials at vocab_size - 100 onwards).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spark {

struct AddedTokenSpec {
  int id;
  std::string content;
  bool special;
};

// Spark's added tokens laid out for a vocabulary of vocab_size entries (>= 512).
std::vector<AddedTokenSpec> spark_added_tokens(int vocab_size);

std::string synthetic_tokenizer_json(int vocab_size, uint64_t seed);
std::string synthetic_tokenizer_config_json(int vocab_size, int64_t model_max_length);

}  // namespace spark
