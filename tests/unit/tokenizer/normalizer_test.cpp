#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "spark/error.h"

namespace spark {
namespace {

std::string normalize(const std::string& config, std::string_view text) {
  return Normalizer::from_json(nlohmann::json::parse(config)).normalize(text);
}

std::string error_of(const std::string& config) {
  try {
    Normalizer::from_json(nlohmann::json::parse(config));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Normalizer, NullAndEmptySequenceAreNoOps) {
  EXPECT_TRUE(Normalizer::from_json(nullptr).is_noop());
  EXPECT_TRUE(
      Normalizer::from_json(nlohmann::json::parse(R"({"type": "Sequence", "normalizers": []})")).is_noop());
  EXPECT_FALSE(Normalizer::from_json(nlohmann::json::parse(R"({"type": "NFC"})")).is_noop());
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": []})", "Ab \xC3\xA9"), "Ab \xC3\xA9");
}

TEST(Normalizer, UnicodeForms) {
  const std::string composed = "caf\xC3\xA9", decomposed = "cafe\xCC\x81";
  EXPECT_EQ(normalize(R"({"type": "NFC"})", decomposed), composed);
  EXPECT_EQ(normalize(R"({"type": "NFD"})", composed), decomposed);
  // Compatibility forms fold ligatures, circled and full-width digits, full-width letters.
  EXPECT_EQ(normalize(R"({"type": "NFKC"})", "\xEF\xAC\x81 \xE2\x91\xA0 \xEF\xBC\xA1"), "fi 1 A");
  EXPECT_EQ(normalize(R"({"type": "NFKD"})", "\xEF\xAC\x81" + composed), "fi" + decomposed);
  // Hugging Face's tables are Unicode 9.0: U+32FF (square era name Reiwa, Unicode 12.1) stays, and Dogra's
  // nukta and virama (Unicode 11) keep their order.
  EXPECT_EQ(normalize(R"({"type": "NFKC"})", "\xE3\x8B\xBF"), "\xE3\x8B\xBF");
  EXPECT_EQ(normalize(R"({"type": "NFC"})", "\xF0\x91\xA0\xB9\xF0\x91\xA0\xBA"), "\xF0\x91\xA0\xB9\xF0\x91\xA0\xBA");
  // NFC keeps the ligature; ASCII is unchanged by every form.
  EXPECT_EQ(normalize(R"({"type": "NFC"})", "\xEF\xAC\x81"), "\xEF\xAC\x81");
  EXPECT_EQ(normalize(R"({"type": "NFKD"})", "plain ASCII"), "plain ASCII");
}

TEST(Normalizer, LowercaseIsRustsPerCharacterFullMapping) {
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "Hello WORLD"), "hello world");
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\xC3\x80\xC3\x89\xC3\x9C"),
            "\xC3\xA0\xC3\xA9\xC3\xBC");  // ÀÉÜ
  // U+0130 (İ) becomes "i" + U+0307, as Rust's char::to_lowercase gives.
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\xC4\xB0"), "i\xCC\x87");
  // No final-sigma rule: every Σ becomes σ, even at the end of a word.
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\xCE\x9F\xCE\xA3 \xCE\xA3"), "\xCE\xBF\xCF\x83 \xCF\x83");
  // Characters newer than ICU's tables, as Rust's standard library maps them.
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\xEA\x9F\x8B\xF0\x90\xB5\x90"), "\xC9\xA4\xF0\x90\xB5\xB0");
  // Cyrillic, Deseret (outside the BMP).
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\xD0\x9F\xF0\x90\x90\x80"), "\xD0\xBF\xF0\x90\x90\xA8");
}

TEST(Normalizer, StripReplacePrepend) {
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": true})",
                      "\xE3\x80\x80 a b\xC2\xA0\n"),
            "a b");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": false, "strip_right": true})", "  a  "), "  a");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": false})", "  a  "), "a  ");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": true})", " \t "), "");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})", "a b  c"),
            "a\xE2\x96\x81"
            "b\xE2\x96\x81\xE2\x96\x81"
            "c");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"Regex": "\\d+"}, "content": "#"})", "a1b22c"),
            "a#b#c");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"String": "."}, "content": ""})", "a.b"), "ab");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "\u2581"})", "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "\u2581"})", ""), "");
}

TEST(Normalizer, SequenceRunsInOrderAndNests) {
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": [
                           {"type": "Replace", "pattern": {"String": "A"}, "content": "x"},
                           {"type": "Sequence", "normalizers": [{"type": "Lowercase"}]},
                           {"type": "Prepend", "prepend": "_"}]})",
                      "AaB"),
            "_xab");
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]})",
                      "\xEF\xBC\xA8\xEF\xBD\x85llo"),  // full-width "He"
            "hello");
}

TEST(Normalizer, RefusesWhatItCannotRunByName) {
  EXPECT_NE(error_of(R"({"type": "BertNormalizer"})").find("normalizer 'BertNormalizer' is not supported"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"type": "Sequence", "normalizers": [{"type": "Precompiled"}]})").find("'Precompiled'"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"type": "Replace", "content": "x"})").find("Replace"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "Sequence"})").find("normalizers"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "Prepend"})").find("prepend"), std::string::npos);
  EXPECT_NE(error_of(R"([1])").find("must be an object"), std::string::npos);
}

}  // namespace
}  // namespace spark
