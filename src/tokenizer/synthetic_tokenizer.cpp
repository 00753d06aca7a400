#include "tokenizer/synthetic_tokenizer.h"

#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "spark/error.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"

namespace spark {

namespace {

using ordered_json = nlohmann::ordered_json;

// Pre-tokenized pieces of the corpus with their counts: what BPE training sees.
std::vector<std::pair<std::string, int64_t>> corpus_word_counts(const PreTokenizer& pre) {
  std::unordered_map<std::string_view, int64_t> counts;
  std::vector<std::string_view> pieces;
  PieceArena arena;
  pre.split(synthetic_tokenizer_corpus(), pieces, arena);
  for (std::string_view p : pieces) ++counts[p];
  std::vector<std::pair<std::string, int64_t>> words;
  words.reserve(counts.size());
  for (const auto& [w, c] : counts) words.emplace_back(std::string(w), c);
  return words;
}

}  // namespace

std::vector<AddedTokenSpec> spark_added_tokens(int vocab_size) {
  if (vocab_size < 512) throw Error("synthetic tokenizer: vocab_size must be at least 512");
  std::vector<AddedTokenSpec> t = {
      {0,
       "<\xEF\xBD\x9C"
       "start\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
       true},
      {1,
       "<\xEF\xBD\x9C"
       "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
       true},
      {2, "<\xEF\xBD\x9C\xE2\x96\x81pad\xE2\x96\x81\xEF\xBD\x9C>", true},
      {3, "<think>", false},
      {4, "</think>", false},
      {5, "<unk>", true},
      {6, "<|startoftext|>", true},
      {7, "<|endoftext|>", true},
      {8, "<User>", true},
      {9, "<System>", true},
      {10, "<Bot>", true},
      {11, "<|fim_prefix|>", true},
      {12, "<|fim_middle|>", true},
      {13, "<|fim_suffix|>", true},
  };
  const int hi = vocab_size - 100;  // 130972 in the real vocabulary
  const char* chat[] = {"<|System|>",  "<|User|>",        "<|Tool|>",         "<|Developer|>", "<|Bot|>",
                        "<tool_call>", "<tool_response>", "</tool_response>", "<arg_key>",     "</arg_key>",
                        "<arg_value>", "</arg_value>",    "</tool_call>"};
  for (int i = 0; i < 13; ++i) t.push_back({hi + i, chat[i], i < 5});
  for (int id = vocab_size - 86; id < vocab_size; ++id) {
    t.push_back({id, "<|reserved_special_" + std::to_string(id - (vocab_size - 86)) + "|>", true});
  }
  return t;
}

std::string synthetic_tokenizer_json(int vocab_size, uint64_t seed) {
  (void)seed;  // see the header: the tokenizer is a function of vocab_size only
  const auto added = spark_added_tokens(vocab_size);
  const std::string pre_text = spark_pre_tokenizer_json();
  const nlohmann::json pre_config = nlohmann::json::parse(pre_text);
  const PreTokenizer pre = PreTokenizer::from_json(pre_config);

  // Every id gets exactly one vocabulary entry: added tokens and bytes where they belong, learned
  // tokens in the free ids in order.
  std::vector<std::string> vocab(static_cast<size_t>(vocab_size));
  std::vector<bool> taken(static_cast<size_t>(vocab_size), false);
  std::unordered_set<std::string> forbidden;  // merges must not spell an added token's vocabulary key
  for (const auto& a : added) {
    vocab[a.id] = a.content;
    taken[a.id] = true;
    std::string bytes;
    if (byte_level::decode(a.content, bytes)) forbidden.insert(bytes);
  }
  for (int b = 0; b < 256; ++b) {
    const int id = kSyntheticByteTokenBase + b;
    if (taken[id]) throw Error("synthetic tokenizer: byte token id " + std::to_string(id) + " is taken");
    vocab[id] = byte_level::encode(std::string(1, static_cast<char>(b)));
    taken[id] = true;
  }
  std::vector<int> free_ids;
  for (int id = 0; id < vocab_size; ++id) {
    if (!taken[id]) free_ids.push_back(id);
  }

  const auto merges = train_bpe(corpus_word_counts(pre), free_ids.size(), forbidden);
  std::unordered_set<std::string> known;
  for (int b = 0; b < 256; ++b) known.insert(std::string(1, static_cast<char>(b)));
  size_t next_free = 0;
  ordered_json merges_json = ordered_json::array();
  for (const auto& m : merges) {
    const std::string merged = m.left + m.right;
    if (known.insert(merged).second) vocab[free_ids[next_free++]] = byte_level::encode(merged);
    // Byte-level text never contains a plain space (it is Ġ), so "left right" is unambiguous.
    merges_json.push_back(byte_level::encode(m.left) + " " + byte_level::encode(m.right));
  }
  if (next_free != free_ids.size()) throw Error("synthetic tokenizer: the trainer left ids unfilled");

  // In id order, as Hugging Face writes it. The entries are distinct by construction, so they are
  // appended to ordered_map's vector directly: its operator[] searches linearly (quadratic in total).
  ordered_json vocab_json = ordered_json::object();
  auto& entries = vocab_json.get_ref<ordered_json::object_t&>();
  entries.reserve(static_cast<size_t>(vocab_size));
  for (int id = 0; id < vocab_size; ++id)
    entries.ordered_json::object_t::Container::emplace_back(vocab[id], id);
  ordered_json added_json = ordered_json::array();
  for (const auto& a : added) {
    added_json.push_back({{"id", a.id},
                          {"content", a.content},
                          {"single_word", false},
                          {"lstrip", false},
                          {"rstrip", false},
                          {"normalized", false},
                          {"special", a.special}});
  }
  // As the DeepSeek-lineage files write "no normalizer".
  ordered_json no_normalizer = ordered_json::object();
  no_normalizer["type"] = "Sequence";
  no_normalizer["normalizers"] = ordered_json::array();
  ordered_json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_json},
      {"normalizer", no_normalizer},
      {"pre_tokenizer", ordered_json::parse(pre_text)},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab_json},
        {"merges", merges_json}}}};
  return tok.dump(2);
}

std::string synthetic_tokenizer_config_json(int vocab_size, int64_t model_max_length) {
  const auto added = spark_added_tokens(vocab_size);
  ordered_json decoder = ordered_json::object();
  for (const auto& a : added) {
    decoder[std::to_string(a.id)] = {{"content", a.content}, {"lstrip", false},      {"normalized", false},
                                     {"rstrip", false},      {"single_word", false}, {"special", a.special}};
  }
  ordered_json cfg = {{"add_bos_token", false},
                      {"add_eos_token", false},
                      {"added_tokens_decoder", decoder},
                      {"bos_token", added[0].content},
                      {"eos_token", added[1].content},
                      {"pad_token", added[2].content},
                      {"unk_token", nullptr},
                      {"clean_up_tokenization_spaces", false},
                      {"model_max_length", model_max_length},
                      {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return cfg.dump(2);
}

}  // namespace spark
