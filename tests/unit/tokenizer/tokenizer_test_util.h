// Builders for small tokenizer.json texts used by the tokenizer unit tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"

namespace spark::test {

// A byte-level BPE tokenizer.json: the 256 byte tokens at ids 0..255, then `merges` (raw-byte pairs,
// each creating the next id unless its result already exists), then `extra_vocab` entries (raw bytes)
// and `added` tokens (content, special) at the following ids.
inline nlohmann::json make_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                                          const std::vector<std::pair<std::string, bool>>& added = {},
                                          const nlohmann::json& pre_tokenizer = nullptr,
                                          const std::vector<std::string>& extra_vocab = {}) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  int next = 0;
  auto add = [&](const std::string& text) {
    if (!vocab.contains(text)) vocab[text] = next++;
  };
  for (int b = 0; b < 256; ++b) add(byte_level::encode(std::string(1, static_cast<char>(b))));
  nlohmann::json merges_json = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    add(byte_level::encode(a + b));
    merges_json.push_back(byte_level::encode(a) + " " + byte_level::encode(b));
  }
  for (const auto& e : extra_vocab) add(byte_level::encode(e));
  nlohmann::json added_json = nlohmann::json::array();
  for (const auto& [content, special] : added) {
    added_json.push_back({{"id", next++},
                          {"content", content},
                          {"single_word", false},
                          {"lstrip", false},
                          {"rstrip", false},
                          {"normalized", false},
                          {"special", special}});
  }
  nlohmann::json pre = pre_tokenizer;
  if (pre.is_null()) pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  return {
      {"version", "1.0"},
      {"added_tokens", added_json},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", nlohmann::json::parse(vocab.dump())}, {"merges", merges_json}}}};
}

}  // namespace spark::test
