// Other tokenizer.json forms of a generated checkpoint's tokenizer (spark-make-checkpoint
// --tokenizer-variant): the same vocabulary, merges and added-token ids, written with another
// normalizer, pre-tokenizer, decoder, post-processor or added-token options, so that tests can check
// every form the loader reads against Hugging Face `tokenizers`, and a model generates the same ids.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace spark {

// default (the empty Sequence normalizer the real files have), null-normalizer, nfc, nfkc-lowercase,
// added-normalized, added-strip, gpt2-bytelevel, split-removed, punct-whitespace, decoders,
// template-post.
const std::vector<std::string>& tokenizer_variant_names();

// Whether decode(encode(s)) gives s back for every s in the variant (a prefix space, removed text,
// normalization or case folding do not give it back).
bool tokenizer_variant_round_trips(const std::string& name);

// The tokenizer.json text `tokenizer_json` rewritten into the named form. Throws spark::Error for an
// unknown name.
std::string tokenizer_variant_json(const std::string& tokenizer_json, const std::string& name);

// Rewrites dir/tokenizer.json into the named form (and dir/tokenizer_config.json's added-token flags
// to match).
void write_tokenizer_variant(const std::filesystem::path& dir, const std::string& name);

}  // namespace spark
