// tokenizer.json / tokenizer_config.json for generated checkpoints: a byte-level BPE trained (by our
// own deterministic trainer) on the multilingual text in corpus/, with Spark's pre-tokenizer and Spark's
// added tokens at the same places relative to the vocabulary as in the real 131072-entry vocabulary:
// low ids 0..13, the 256 byte tokens at 14..269, the chat specials from vocab_size - 100, reserved
// specials at the end, and merges filling every id in between, so the vocabulary is dense.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

struct AddedTokenSpec {
  int id;
  std::string content;
  bool special;
};

// Spark's added tokens laid out for a vocabulary of vocab_size entries (>= 512).
std::vector<AddedTokenSpec> spark_added_tokens(int vocab_size);

// Id of the token for byte b in generated vocabularies.
inline constexpr int kSyntheticByteTokenBase = 14;

// The tokenizer does not depend on `seed`: every generated checkpoint of one vocabulary size tokenizes
// identically, whatever its weights.
std::string synthetic_tokenizer_json(int vocab_size, uint64_t seed);
std::string synthetic_tokenizer_config_json(int vocab_size, int64_t model_max_length);

// The training text (corpus/*.txt compiled in).
std::string_view synthetic_tokenizer_corpus();

}  // namespace spark
