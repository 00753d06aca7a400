#include "tokenizer/tokenizer_variants.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "spark/error.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace spark {
namespace {

const std::string& base_json() {
  static const std::string json = synthetic_tokenizer_json(512, 1);
  return json;
}

Tokenizer variant(const std::string& name) {
  return Tokenizer::from_json(tokenizer_variant_json(base_json(), name), name);
}

TEST(TokenizerVariants, GeneratedTokenizerHasTheEmptySequenceNormalizer) {
  const auto j = nlohmann::json::parse(base_json());
  EXPECT_EQ(j["normalizer"], nlohmann::json::parse(R"({"type": "Sequence", "normalizers": []})"));
}

TEST(TokenizerVariants, EveryFormLoadsWithTheSameVocabulary) {
  const Tokenizer base = Tokenizer::from_json(base_json());
  const std::string text = "hello world, the model<think>ok</think> 123";
  for (const auto& name : tokenizer_variant_names()) {
    SCOPED_TRACE(name);
    const Tokenizer tok = variant(name);
    EXPECT_EQ(tok.vocab_size(), base.vocab_size());
    EXPECT_EQ(tok.num_merges(), base.num_merges());
    EXPECT_EQ(tok.token_to_id("<think>"), base.token_to_id("<think>"));
    const auto ids = tok.encode(text);
    if (tokenizer_variant_round_trips(name)) {
      EXPECT_EQ(tok.decode(ids), text);
    }
  }
}

TEST(TokenizerVariants, EachFormDoesWhatItsNameSays) {
  const Tokenizer base = Tokenizer::from_json(base_json());
  const auto same = base.encode("hello world");
  for (const char* name : {"default", "null-normalizer", "nfc", "decoders", "template-post"})
    EXPECT_EQ(variant(name).encode("hello world"), same) << name;
  EXPECT_EQ(variant("nfkc-lowercase").encode("HELLO \xEF\xBD\x97orld"), same);  // full-width w
  const int32_t think = *base.token_to_id("<think>");
  EXPECT_EQ(variant("added-normalized").encode("<THINK>"), std::vector<int32_t>{think});
  EXPECT_NE(base.encode("<THINK>"), std::vector<int32_t>{think});
  // lstrip on <think>: the spaces before it belong to the token.
  EXPECT_EQ(variant("added-strip").encode("a  <think>"),
            (std::vector<int32_t>{*base.token_to_id("a"), think}));
  EXPECT_EQ(variant("gpt2-bytelevel").encode("hello"), base.encode(" hello"));
  // Whitespace removed: the words meet no space, however they were separated.
  EXPECT_EQ(variant("split-removed").encode("hello   world"),
            variant("split-removed").encode("hello\nworld"));
  EXPECT_EQ(variant("punct-whitespace").encode("a , b"), variant("punct-whitespace").encode("a,b"));
  const Tokenizer bos = variant("template-post");
  std::vector<int32_t> with_bos = {0};
  with_bos.insert(with_bos.end(), same.begin(), same.end());
  EXPECT_EQ(bos.encode("hello world", true), with_bos);
  EXPECT_EQ(base.encode("hello world", true), same);  // the real post-processor (ByteLevel) adds nothing
}

TEST(TokenizerVariants, UnknownNameIsAnError) {
  try {
    tokenizer_variant_json(base_json(), "sentencepiece");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown tokenizer variant 'sentencepiece' (known: default,"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace spark
