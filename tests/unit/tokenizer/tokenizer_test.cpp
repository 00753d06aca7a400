#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "spark/error.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer_test_util.h"

namespace spark {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("spark-tokenizer-test-" + name + "-" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Tokenizer, EncodesAddedTokensPiecesAndMerges) {
  const auto json = test::make_tokenizer_json({{"a", "b"}, {"ab", "c"}}, {{"<s>", true}, {"<t>", false}});
  const Tokenizer tok = Tokenizer::from_json(json.dump());
  const int32_t abc = *tok.token_to_id("abc"), s = *tok.token_to_id("<s>"), t = *tok.token_to_id("<t>");
  EXPECT_EQ(abc, 257);
  EXPECT_EQ(tok.encode("abc<s>ab<t>c"), (std::vector<int32_t>{abc, s, 256, t, 'c'}));
  EXPECT_EQ(tok.decode(tok.encode("abc<s>ab<t>c")), "abc<s>ab<t>c");
  EXPECT_EQ(tok.decode(tok.encode("abc<s>ab<t>c"), true), "abcab<t>c");
  EXPECT_TRUE(tok.is_special(s));
  EXPECT_FALSE(tok.is_special(t));
  EXPECT_TRUE(tok.is_added(t));
  EXPECT_EQ(tok.token_bytes(' '), " ");
  EXPECT_EQ(tok.id_to_token(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.num_merges(), 2u);
}

TEST(Tokenizer, RejectsInvalidUtf8AndUnknownIds) {
  const Tokenizer tok = Tokenizer::from_json(test::make_tokenizer_json({}).dump());
  EXPECT_NE(error_of([&] { tok.encode("ok\xC3"); }).find("not valid UTF-8 (byte offset 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tok.decode(std::vector<int32_t>{1, 999}); }).find("999"), std::string::npos);
  EXPECT_FALSE(tok.contains(-3));
  // Invalid bytes from the model decode with U+FFFD; decode_bytes keeps them.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0xE4, 'a'}),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(tok.decode_bytes(std::vector<int32_t>{0xE4, 'a'}),
            "\xE4"
            "a");
}

TEST(Tokenizer, LoaderErrorsNameTheProblem) {
  auto load = [](const nlohmann::json& j) {
    return error_of([&] { Tokenizer::from_json(j.dump(), "x/tokenizer.json"); });
  };
  const auto base = test::make_tokenizer_json({{"a", "b"}});
  EXPECT_NE(error_of([] {
              Tokenizer::from_json("{not json", "x/tokenizer.json");
            }).find("x/tokenizer.json: invalid JSON"),
            std::string::npos);
  auto j = base;
  j["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_NE(load(j).find("x/tokenizer.json: normalizer 'BertNormalizer' is not supported"),
            std::string::npos);
  j = base;
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}};
  EXPECT_NE(load(j).find("normalizer 'Precompiled' is not supported"), std::string::npos);
  j = base;
  j["post_processor"] = {{"type", "Unknown"}};
  EXPECT_NE(load(j).find("x/tokenizer.json: post_processor 'Unknown' is not supported"), std::string::npos);
  j = base;
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(load(j).find("x/tokenizer.json: decoder 'WordPiece' is not supported"), std::string::npos);
  j = base;
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(load(j).find("model type 'WordPiece'"), std::string::npos);
  j = base;
  j["model"]["merges"].push_back("a zz");
  EXPECT_NE(load(j).find("merge 2 ('a zz'): 'zz' is not in the vocabulary"), std::string::npos);
  j = base;
  j["model"]["merges"].push_back("b c");  // "bc" is not in the vocabulary
  EXPECT_NE(load(j).find("'bc' is not in the vocabulary"), std::string::npos);
  j = base;
  j["model"]["merges"].push_back("a b c");
  EXPECT_NE(load(j).find("not two tokens"), std::string::npos);
  j = base;
  j["decoder"] = nullptr;
  EXPECT_NE(load(j).find("x/tokenizer.json: decoder: missing"), std::string::npos);
  j = base;
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_NE(load(j).find("x/tokenizer.json: pre_tokenizer: 'Metaspace' is not supported"), std::string::npos);
  j = base;
  j["model"]["vocab"]["x"] = "seven";
  EXPECT_NE(load(j).find("vocab entry 'x'"), std::string::npos);
  j = base;
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(load(j).find("dropout"), std::string::npos);
  j = base;
  j["model"]["fuse_unk"] = "yes";  // wrong type anywhere is still one spark::Error naming the file
  EXPECT_NE(load(j).find("x/tokenizer.json: "), std::string::npos);
  j = base;
  j["added_tokens"] = {{{"content", "<x>"}}};
  EXPECT_NE(load(j).find("valid \"id\""), std::string::npos);
  EXPECT_NE(error_of([] { Tokenizer::from_file("/nonexistent/tokenizer.json"); }).find("cannot read"),
            std::string::npos);
  EXPECT_NE(error_of([] { Tokenizer::from_model_dir("/nonexistent"); }).find("no tokenizer.json"),
            std::string::npos);
}

TEST(Tokenizer, MergesAsPairsAndAsStringsLoadTheSame) {
  auto j = test::make_tokenizer_json({{"a", "b"}, {"ab", "c"}});
  const Tokenizer strings = Tokenizer::from_json(j.dump());
  j["model"]["merges"] =
      nlohmann::json::array({nlohmann::json::array({"a", "b"}), nlohmann::json::array({"ab", "c"})});
  const Tokenizer pairs = Tokenizer::from_json(j.dump());
  EXPECT_EQ(strings.encode("abcab"), pairs.encode("abcab"));
  EXPECT_EQ(pairs.encode("abcab"), (std::vector<int32_t>{257, 256}));
}

class SyntheticTokenizer : public ::testing::TestWithParam<int> {};

TEST_P(SyntheticTokenizer, DenseVocabularyWithSparksLayout) {
  const int vocab_size = GetParam();
  const std::string text = synthetic_tokenizer_json(vocab_size, 1);
  EXPECT_EQ(text, synthetic_tokenizer_json(vocab_size, 99)) << "the tokenizer must not depend on the seed";
  const Tokenizer tok = Tokenizer::from_json(text);
  EXPECT_EQ(tok.vocab_size(), vocab_size);
  for (int32_t id = 0; id < vocab_size; ++id) ASSERT_TRUE(tok.contains(id)) << "hole at id " << id;
  for (int b = 0; b < 256; ++b) {
    ASSERT_EQ(tok.token_bytes(kSyntheticByteTokenBase + b), std::string(1, static_cast<char>(b)));
  }
  for (const auto& a : spark_added_tokens(vocab_size)) {
    EXPECT_EQ(tok.token_bytes(a.id), a.content);
    EXPECT_EQ(tok.is_special(a.id), a.special);
    EXPECT_EQ(tok.encode("x" + a.content + "y").at(1), a.id);
  }
  EXPECT_EQ(*tok.token_to_id("<|User|>"), vocab_size - 99);
  EXPECT_EQ(*tok.token_to_id("</tool_call>"), vocab_size - 88);
  EXPECT_GE(tok.num_merges(), static_cast<size_t>(vocab_size - 256 - 113));
  // Learned tokens are real: the corpus encodes to far fewer ids than bytes (measured: 1.4 bytes per
  // token at 512 entries, 1.9 at 1024, 3.3 at 4096).
  const std::string_view corpus = synthetic_tokenizer_corpus();
  const auto ids = tok.encode(corpus);
  EXPECT_EQ(tok.decode(ids), corpus);
  const double bytes_per_token = static_cast<double>(corpus.size()) / static_cast<double>(ids.size());
  EXPECT_GT(bytes_per_token, vocab_size >= 4096 ? 3.0 : vocab_size >= 1024 ? 1.7 : 1.3);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SyntheticTokenizer, ::testing::Values(512, 1024, 4096, 5000, 20000));

TEST(SyntheticTokenizerLayout, RejectsTinyVocabularies) {
  EXPECT_THROW(synthetic_tokenizer_json(511, 1), Error);
}

TEST(Tokenizer, VocabAndMergesFilesMatchTokenizerJson) {
  const auto dir = temp_dir("vocab-merges");
  const std::string text = synthetic_tokenizer_json(1024, 1);
  const auto j = nlohmann::json::parse(text);
  write(dir / "vocab.json", j["model"]["vocab"].dump());
  std::string merges = "#version: 0.2\n";
  for (const auto& m : j["model"]["merges"]) merges += m.get<std::string>() + "\n";
  write(dir / "merges.txt", merges);
  write(dir / "tokenizer_config.json", synthetic_tokenizer_config_json(1024, 4096));
  const Tokenizer from_files = Tokenizer::from_model_dir(dir);
  const Tokenizer from_json = Tokenizer::from_json(text);
  const std::string sample = std::string(synthetic_tokenizer_corpus().substr(0, 20000)) +
                             "<|User|>hi<think>x</think>\xE4\xBD\xA0 1234";
  EXPECT_EQ(from_files.encode(sample), from_json.encode(sample));
  EXPECT_EQ(from_files.added_tokens().size(), from_json.added_tokens().size());
  EXPECT_TRUE(from_files.is_special(1));
  write(dir / "tokenizer.json", text);  // now preferred
  EXPECT_EQ(Tokenizer::from_model_dir(dir).num_merges(), from_json.num_merges());
  std::filesystem::remove_all(dir);
}

TEST(Tokenizer, ConcurrentEncodingMatchesSerial) {
  const Tokenizer tok = Tokenizer::from_json(synthetic_tokenizer_json(1024, 1));
  const std::string_view corpus = synthetic_tokenizer_corpus();
  std::vector<std::string> lines;
  for (size_t i = 0; i < corpus.size(); i += 997) lines.emplace_back(corpus.substr(i, 997));
  // The cuts fall mid-character: trim each line to whole characters.
  for (auto& l : lines) {
    while (!l.empty() && (static_cast<unsigned char>(l.front()) & 0xC0) == 0x80) l.erase(0, 1);
    while (!l.empty() && (static_cast<unsigned char>(l.back()) & 0xC0) == 0x80) l.pop_back();
    if (!l.empty() && static_cast<unsigned char>(l.back()) >= 0xC0) l.pop_back();
  }
  std::vector<std::vector<int32_t>> expect;
  for (const auto& l : lines) expect.push_back(tok.encode(l));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < lines.size(); ++i) {
        const size_t j = (i * 7 + k * 13) % lines.size();
        if (tok.encode(lines[j]) != expect[j]) ++mismatches[k];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace spark

namespace spark {
namespace {

// "<T>" is matched after normalization (by its normalized content), "<S>" on the raw text only.
nlohmann::json lowercase_tokenizer_json() {
  auto j = test::make_tokenizer_json({{"a", "b"}}, {{"<T>", false}, {"<S>", true}});
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}}}};
  j["added_tokens"][0]["normalized"] = true;
  return j;
}

TEST(TokenizerNormalization, NormalizedAddedTokensMatchTheNormalizedText) {
  const Tokenizer tok = Tokenizer::from_json(lowercase_tokenizer_json().dump());
  const int32_t t = *tok.token_to_id("<T>"), s = *tok.token_to_id("<S>"), ab = *tok.token_to_id("ab");
  EXPECT_EQ(tok.encode("AB<T>x"), (std::vector<int32_t>{ab, t, 'x'}));
  EXPECT_EQ(tok.encode("<t>"), std::vector<int32_t>{t});
  EXPECT_EQ(tok.encode("<S>Ab"), (std::vector<int32_t>{s, ab}));
  // "<s>" is not the special token: its normalized:false content is matched on raw text only.
  EXPECT_EQ(tok.encode("<s>"), (std::vector<int32_t>{'<', 's', '>'}));
  // Raw "<S>" is cut out before lowercasing could turn it into text.
  EXPECT_EQ(tok.encode("A<S>B"), (std::vector<int32_t>{'a', s, 'b'}));
}

TEST(TokenizerNormalization, EmptySequenceEncodesAsNoNormalizer) {
  auto j = test::make_tokenizer_json({{"a", "b"}}, {{"<x>", false}});
  const Tokenizer none = Tokenizer::from_json(j.dump());
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}};
  const Tokenizer empty = Tokenizer::from_json(j.dump());
  for (const char* text : {"abab<x> ab\n", "", "\xC3\xA9<x><x>"})
    EXPECT_EQ(none.encode(text), empty.encode(text));
}

TEST(TokenizerNormalization, NfkcThenBpe) {
  auto j = test::make_tokenizer_json({{"f", "i"}});
  j["normalizer"] = {{"type", "NFKC"}};
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  EXPECT_EQ(tok.encode("\xEF\xAC\x81"), std::vector<int32_t>{*tok.token_to_id("fi")});  // the ligature
}

TEST(TokenizerSpecialTokens, PostProcessorAndTokenizerConfig) {
  auto j = test::make_tokenizer_json({}, {{"<s>", true}, {"</s>", true}});
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 256}}, {"sep", {"</s>", 257}}};
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  EXPECT_EQ(tok.encode("a"), std::vector<int32_t>{'a'});
  EXPECT_EQ(tok.encode("a", true), (std::vector<int32_t>{256, 'a', 257}));
  EXPECT_EQ(tok.encode("", true), (std::vector<int32_t>{256, 257}));
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 999}}, {"sep", {"</s>", 257}}};
  EXPECT_NE(error_of([&] {
              Tokenizer::from_json(j.dump(), "x/tokenizer.json");
            }).find("x/tokenizer.json: post_processor token id 999 is not in the vocabulary"),
            std::string::npos);

  // tokenizer_config.json's add_bos_token / add_eos_token decide when either is true.
  j["post_processor"] = {{"type", "ByteLevel"}};
  const auto dir = temp_dir("config-bos");
  write(dir / "tokenizer.json", j.dump());
  write(dir / "tokenizer_config.json",
        R"({"add_bos_token": false, "add_eos_token": false, "bos_token": "<s>"})");
  EXPECT_EQ(Tokenizer::from_model_dir(dir).encode("a", true), std::vector<int32_t>{'a'});
  write(
      dir / "tokenizer_config.json",
      R"({"add_bos_token": true, "add_eos_token": true, "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  const Tokenizer with_config = Tokenizer::from_model_dir(dir);
  EXPECT_EQ(with_config.encode("a", true), (std::vector<int32_t>{256, 'a', 257}));
  EXPECT_EQ(with_config.encode("a"), std::vector<int32_t>{'a'});
  write(dir / "tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<nope>"})");
  EXPECT_NE(
      error_of([&] { Tokenizer::from_model_dir(dir); }).find("bos_token '<nope>' is not in the vocabulary"),
      std::string::npos);
  write(dir / "tokenizer_config.json", R"({"add_eos_token": true})");
  EXPECT_NE(error_of([&] { Tokenizer::from_model_dir(dir); }).find("there is no eos_token"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(TokenizerDecoder, DecodeRunsTheDecoderSteps) {
  auto j = test::make_tokenizer_json({}, {{"<s>", true}});
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "ByteLevel"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  const auto ids = tok.encode("<s> hi");
  EXPECT_EQ(tok.decode(ids), "<s> hi");
  EXPECT_EQ(tok.decode(ids, true), "hi");  // " hi" without its leading space
  EXPECT_EQ(tok.decode_bytes(ids, true), " hi");
}

}  // namespace
}  // namespace spark
