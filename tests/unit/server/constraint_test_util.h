// Vocabularies for the tool-call constraint tests.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "server/tool_call_constraint.h"

namespace spark::test {

constexpr int32_t kEndToken = 0;

// Id 0 is the end token, 1..256 are the single bytes (so every text can be spelled), then Spark's special
// tokens as single tokens, then multi-byte tokens chosen to cross the syntax's boundaries: parts of tags,
// JSON punctuation, escapes, whole and partial UTF-8 characters, and one empty text.
inline std::vector<std::string> small_vocab_texts() {
  std::vector<std::string> texts{
      "<\xef\xbd\x9c"
      "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"};
  for (int b = 0; b < 256; ++b) texts.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"<tool_call>",
                        "</tool_call>",
                        "<arg_key>",
                        "</arg_key>",
                        "<arg_value>",
                        "</arg_value>",
                        "<think>",
                        "</think>",
                        "<tool_response>",
                        "tap",
                        "index",
                        "text",
                        "city",
                        "unit",
                        "kelvin",
                        "labels",
                        "options",
                        "repeat",
                        "inner",
                        "depth",
                        "true",
                        "false",
                        "null",
                        "nul",
                        " the",
                        "ing",
                        "\":",
                        "\", \"",
                        "{\"",
                        "}",
                        "},",
                        "}}",
                        "[\"",
                        "\"]",
                        "[]",
                        "{}",
                        "12",
                        "3.5",
                        "-0",
                        "e+",
                        "E-7",
                        "</",
                        "<arg",
                        "_key>",
                        "value>",
                        "</arg_value></tool_call>",
                        "</arg_key><arg_value>",
                        "\xc3\xa9",
                        "\xf0\x9f\x98\x80",
                        "\xf0\x9f",
                        "\x98\x80",
                        "a<b",
                        "\\n",
                        "\\\"",
                        "\\u00e9",
                        "\n\n",
                        "  ",
                        "get_weather",
                        "Paris",
                        "\"c\"",
                        "\"f\"",
                        "c",
                        "10",
                        "1",
                        ", ",
                        ": ",
                        "\"a\"",
                        "\"b\"",
                        "\"repeat\":",
                        "\"label\"",
                        "ab\"cd",
                        "x\\",
                        "\x7f",
                        ""}) {
    texts.emplace_back(t);
  }
  std::mt19937 rng(1234);
  const std::string alphabet = "abcdefxyz019 _-.,:;\"'{}[]<>/\\\n";
  for (int i = 0; i < 300; ++i) {
    std::string t;
    const int len = 2 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    texts.push_back(t);
  }
  return texts;
}

inline std::shared_ptr<const ConstraintVocab> small_vocab() {
  static const auto vocab =
      std::make_shared<const ConstraintVocab>(small_vocab_texts(), std::vector<int32_t>{0});
  return vocab;
}

}  // namespace spark::test
