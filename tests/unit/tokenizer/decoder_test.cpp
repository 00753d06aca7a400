#include "tokenizer/decoder.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "spark/error.h"
#include "tokenizer/post_processor.h"

namespace spark {
namespace {

using Tokens = std::vector<std::string>;

std::string decode(const std::string& config, Tokens tokens) {
  return Decoder::from_json(nlohmann::json::parse(config)).decode(std::move(tokens));
}

template <typename T>
std::string error_of(const std::string& config) {
  try {
    T::from_json(nlohmann::json::parse(config));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Decoder, ByteLevelMapsTokensBackToBytes) {
  const std::string bl = R"({"type": "ByteLevel"})";
  EXPECT_TRUE(Decoder::from_json(nlohmann::json::parse(bl)).is_plain_byte_level());
  EXPECT_EQ(decode(bl, {"\xC4\xA0hello", "\xC4\xA0world", "\xC4\x8A"}), " hello world\n");
  // "Ã©" is the two bytes of é; a lone lead byte becomes U+FFFD.
  EXPECT_EQ(decode(bl, {"caf", "\xC3\x83\xC2\xA9"}), "caf\xC3\xA9");
  EXPECT_EQ(decode(bl, {"a", "\xC3\x83"}), "a\xEF\xBF\xBD");
  // A token outside the byte alphabet (an added token) is its own text.
  EXPECT_EQ(decode(bl, {"<\xEF\xBD\x9C"
                        "bos\xEF\xBD\x9C>",
                        "x"}),
            "<\xEF\xBD\x9C"
            "bos\xEF\xBD\x9C>x");
}

TEST(Decoder, ReplaceAndStripWorkPerTokenFuseJoins) {
  // Before ByteLevel, Replace sees the byte-level text of every token.
  EXPECT_EQ(decode(R"({"type": "Sequence", "decoders": [
                        {"type": "Replace", "pattern": {"String": "x"}, "content": "y"},
                        {"type": "ByteLevel"}]})",
                   {"ax", "\xC4\xA0x"}),
            "ay y");
  // Strip removes up to start/stop copies of the character from each token.
  const std::string strip = R"({"type": "Sequence", "decoders": [
                                  {"type": "Strip", "content": "_", "start": 1, "stop": 2},
                                  {"type": "ByteLevel"}]})";
  EXPECT_EQ(decode(strip, {"__a___", "_b", "c"}), "_a_bc");
  // After Fuse there is one string: Strip then applies once to the whole text.
  EXPECT_EQ(decode(R"({"type": "Sequence", "decoders": [
                        {"type": "ByteLevel"}, {"type": "Fuse"},
                        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
                        {"type": "Replace", "pattern": {"Regex": "o+"}, "content": "0"}]})",
                   {"\xC4\xA0"
                    "foo",
                    "\xC4\xA0"
                    "bo"}),
            "f0 b0");
  EXPECT_FALSE(
      Decoder::from_json(nlohmann::json::parse(R"({"type": "Sequence", "decoders": [{"type": "ByteLevel"},
                                                          {"type": "Fuse"}]})"))
          .is_plain_byte_level());
}

TEST(Decoder, RefusesWhatIsNotByteLevel) {
  EXPECT_NE(error_of<Decoder>(R"({"type": "WordPiece"})").find("decoder 'WordPiece' is not supported"),
            std::string::npos);
  EXPECT_NE(
      error_of<Decoder>(R"({"type": "Sequence", "decoders": [{"type": "Fuse"}]})").find("no ByteLevel step"),
      std::string::npos);
  EXPECT_NE(error_of<Decoder>("null").find("missing"), std::string::npos);
  EXPECT_NE(
      error_of<Decoder>(R"({"type": "Strip", "content": "ab", "start": 1, "stop": 0})").find("one character"),
      std::string::npos);
  EXPECT_NE(error_of<Decoder>(R"({"type": "Strip", "content": "a", "start": -1, "stop": 0})").find("start"),
            std::string::npos);
}

TEST(PostProcessor, TemplateRobertaBertAndSequence) {
  auto parse = [](const std::string& text) { return PostProcessor::from_json(nlohmann::json::parse(text)); };
  EXPECT_TRUE(parse("null").empty());
  EXPECT_TRUE(parse(R"({"type": "ByteLevel", "trim_offsets": false})").empty());
  const PostProcessor t = parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [2, 3], "tokens": ["</", "s>"]}}})");
  EXPECT_EQ(t.prefix, std::vector<int32_t>{1});
  EXPECT_EQ(t.suffix, (std::vector<int32_t>{2, 3}));
  const PostProcessor r = parse(R"({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]})");
  EXPECT_EQ(r.prefix, std::vector<int32_t>{0});
  EXPECT_EQ(r.suffix, std::vector<int32_t>{2});
  // Each processor of a Sequence wraps what the ones before it produced.
  const PostProcessor s = parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "BertProcessing", "sep": ["[SEP]", 5], "cls": ["[CLS]", 4]},
      {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]}]})");
  EXPECT_EQ(s.prefix, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(s.suffix, (std::vector<int32_t>{5, 2}));
  EXPECT_NE(error_of<PostProcessor>(R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}},
      {"SpecialToken": {"id": "<x>"}}], "special_tokens": {}})")
                .find("'<x>' is not in \"special_tokens\""),
            std::string::npos);
  EXPECT_NE(error_of<PostProcessor>(R"({"type": "TemplateProcessing", "single": [], "special_tokens": {}})")
                .find("no sequence A"),
            std::string::npos);
  EXPECT_NE(error_of<PostProcessor>(R"({"type": "Weird"})").find("post_processor 'Weird' is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace spark
