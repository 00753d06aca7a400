#include "tokenizer/synthetic_tokenizer.h"

#include <nlohmann/json.hpp>

#include "spark/error.h"

namespace spark {

namespace {

using ordered_json = nlohmann::ordered_json;

// GPT-2's byte-to-unicode map: printable bytes map to themselves, the rest to U+0100 onwards.
std::vector<std::string> byte_level_alphabet() {
  std::vector<int> code(256, -1);
  for (int b = '!'; b <= '~'; ++b) code[b] = b;
  for (int b = 0xA1; b <= 0xAC; ++b) code[b] = b;
  for (int b = 0xAE; b <= 0xFF; ++b) code[b] = b;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    if (code[b] < 0) code[b] = next++;
  }
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    int cp = code[b];
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    out[b] = s;
  }
  return out;
}

ordered_json split_step(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
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
  (void)seed;
  const auto added = spark_added_tokens(vocab_size);
  ordered_json vocab = ordered_json::object();
  for (const auto& a : added) {
    if (a.id < 14) vocab[a.content] = a.id;
  }
  const auto alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) vocab[alphabet[b]] = 14 + b;
  for (const auto& a : added) {
    if (a.id >= 14) vocab[a.content] = a.id;
  }

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
  ordered_json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split_step("\\p{N}{1,3}"),
        split_step("[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+"),
        split_step("[!\"#$%&'()*+,\\-./"
                   ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
                   "?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+"),
        {{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  ordered_json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_json},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre},
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
        {"vocab", vocab},
        {"merges", ordered_json::array()}}}};
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
