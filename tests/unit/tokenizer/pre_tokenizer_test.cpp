#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "spark/error.h"
#include "tokenizer/unicode_additions.h"

namespace spark {
namespace {

using Pieces = std::vector<std::string>;

Pieces split_with(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::string_view> views;
  PieceArena arena;
  pre.split(text, views, arena);
  return {views.begin(), views.end()};
}

Pieces spark(std::string_view text) {
  static const PreTokenizer pre = PreTokenizer::from_json(nlohmann::json::parse(spark_pre_tokenizer_json()));
  return split_with(pre, text);
}

Pieces step(const PreTokenizerStep& s, std::string_view text) {
  std::vector<std::string_view> views;
  PieceArena arena;
  s.split(text, views, arena, UnicodeTables::kNewer);
  return {views.begin(), views.end()};
}

TEST(SparkPreTokenizer, WordsSpacesAndPunctuation) {
  EXPECT_EQ(spark("Hello world!"), (Pieces{"Hello", " world", "!"}));
  EXPECT_EQ(spark("don't stop"), (Pieces{"don", "'t", " stop"}));
  EXPECT_EQ(spark("a, b...c"), (Pieces{"a", ",", " b", "...", "c"}));
  EXPECT_EQ(spark("x.com/path"), (Pieces{"x", ".com", "/path"}));
}

TEST(SparkPreTokenizer, NumbersBecomeSingleDigits) {
  EXPECT_EQ(spark("abc1234def"), (Pieces{"abc", "1", "2", "3", "4", "def"}));
  EXPECT_EQ(spark("3.14"), (Pieces{"3", ".", "1", "4"}));
  // \p{N} covers other numerals too: Arabic-Indic digits and superscripts split one by one.
  EXPECT_EQ(spark("\xD9\xA3\xD9\xA4x\xC2\xB2"), (Pieces{"\xD9\xA3", "\xD9\xA4", "x", "\xC2\xB2"}));
}

TEST(SparkPreTokenizer, CjkRunsStayTogether) {
  EXPECT_EQ(spark("\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"
                  "abc"),  // 你好世界abc
            (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C", "abc"}));
  // Hiragana and katakana join the run; the Japanese full stop (U+3002) does not.
  EXPECT_EQ(spark("\xE3\x81\x82\xE3\x82\xA2\xE6\x97\xA5\xE3\x80\x82"),
            (Pieces{"\xE3\x81\x82\xE3\x82\xA2\xE6\x97\xA5", "\xE3\x80\x82"}));
}

TEST(SparkPreTokenizer, WhitespaceRunsAndLineBreaks) {
  // \s+(?!\S) leaves the last space of a run to the word after it.
  EXPECT_EQ(spark("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(spark("  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(spark("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(spark("a\r\nb"), (Pieces{"a", "\r", "\n", "b"}));
  EXPECT_EQ(spark("a\t\tb"), (Pieces{"a", "\t", "\tb"}));
  EXPECT_EQ(spark(""), Pieces{});
}

TEST(SparkPreTokenizer, WhitespaceIsUnicodeWhiteSpaceOnly) {
  // U+3000 is White_Space; U+180E is not (PCRE2's own \s would take it; Oniguruma's does not).
  EXPECT_EQ(spark("a\xE3\x80\x80\xE3\x80\x80"
                  "b"),
            (Pieces{"a", "\xE3\x80\x80",
                    "\xE3\x80\x80"
                    "b"}));
  EXPECT_EQ(spark("a \xE1\xA0\x8E"), (Pieces{"a", " ", "\xE1\xA0\x8E"}));
}

TEST(SparkPreTokenizer, NewerUnicodeSymbolsAreSymbols) {
  // U+1FAE8 (an emoji of Unicode 15) is \p{S} for the reference, so it joins the space before it.
  EXPECT_EQ(spark("hi \xF0\x9F\xAB\xA8"), (Pieces{"hi", " \xF0\x9F\xAB\xA8"}));
  EXPECT_EQ(spark("hi \xF0\x9F\x98\x80"), (Pieces{"hi", " \xF0\x9F\x98\x80"}));  // U+1F600 for comparison
}

TEST(SplitStep, EveryBehaviorOnTheDocumentedExample) {
  const std::string text = "the-final--countdown";
  auto with = [&](SplitBehavior b) { return step(SplitStep(Regex("-"), b, false), text); };
  EXPECT_EQ(with(SplitBehavior::kRemoved), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kIsolated), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kMergedWithPrevious), (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kMergedWithNext), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(with(SplitBehavior::kContiguous), (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(SplitStep, InvertSwapsMatchesAndGaps) {
  EXPECT_EQ(step(SplitStep(Regex("[a-z]+"), SplitBehavior::kRemoved, true), "ab12cd3"), (Pieces{"ab", "cd"}));
  EXPECT_EQ(step(SplitStep(Regex("[a-z]+"), SplitBehavior::kRemoved, false), "ab12cd3"), (Pieces{"12", "3"}));
  EXPECT_EQ(step(SplitStep(Regex("x"), SplitBehavior::kMergedWithPrevious, true), "axxbx"),
            (Pieces{"a", "x", "xb", "x"}));
}

TEST(SplitStep, LiteralPatternsMatchThemselves) {
  EXPECT_EQ(step(SplitStep(Regex(".*", true), SplitBehavior::kIsolated, false), "a.*b.c"),
            (Pieces{"a", ".*", "b.c"}));
}

TEST(SplitStep, EmptyMatchesSplitLikeTheReference) {
  // x* matches empty between characters: every character becomes a piece.
  EXPECT_EQ(step(SplitStep(Regex("x*"), SplitBehavior::kIsolated, false), "abxxc"),
            (Pieces{"a", "b", "xx", "c"}));
}

TEST(DigitsStep, IndividualOrRuns) {
  const std::string text = "a12b\xD9\xA3\xD9\xA4";  // Arabic-Indic 3 and 4
  EXPECT_EQ(step(DigitsStep(true), text), (Pieces{"a", "1", "2", "b", "\xD9\xA3", "\xD9\xA4"}));
  EXPECT_EQ(step(DigitsStep(false), text), (Pieces{"a", "12", "b", "\xD9\xA3\xD9\xA4"}));
  EXPECT_EQ(step(DigitsStep(true), "no digits"), (Pieces{"no digits"}));
}

TEST(ByteLevelStep, PrefixSpaceAndGpt2Regex) {
  EXPECT_EQ(step(ByteLevelStep(true, true), "hello world"), (Pieces{" hello", " world"}));
  EXPECT_EQ(step(ByteLevelStep(true, true), " hi"), (Pieces{" hi"}));
  EXPECT_EQ(step(ByteLevelStep(false, true), "I'll pay 100$"), (Pieces{"I", "'ll", " pay", " 100", "$"}));
  EXPECT_EQ(step(ByteLevelStep(false, false), "as is"), (Pieces{"as is"}));
}

TEST(PreTokenizerJson, RejectsWhatItCannotRun) {
  auto load = [](const std::string& text) { return PreTokenizer::from_json(nlohmann::json::parse(text)); };
  auto message = [&](const std::string& text) {
    try {
      load(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"type": "Metaspace"})").find("'Metaspace' is not supported"), std::string::npos);
  EXPECT_NE(message(R"({"type": "Whitespace"})").find("must end with exactly one ByteLevel"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "Sequence", "pretokenizers": [{"type": "Digits"}]})").find("ByteLevel"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Digits"}]})")
                .find("ByteLevel"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(["},
                        "behavior": "Isolated"}, {"type": "ByteLevel"}]})")
                .find("regex '(['"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"},
                        "behavior": "Sideways"}, {"type": "ByteLevel"}]})")
                .find("behavior"),
            std::string::npos);
  EXPECT_NE(message("null").find("not a byte-level"), std::string::npos);
  EXPECT_NO_THROW(load(R"({"type": "ByteLevel", "add_prefix_space": false})"));
}

TEST(PreTokenizerJson, LongRunsDoNotExhaustTheRegexStack) {
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(spark(letters), Pieces{letters});
  const std::string spaces = std::string(1 << 20, ' ') + "x";
  const Pieces p = spark(spaces);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1], " x");
}

}  // namespace
}  // namespace spark

namespace spark {
namespace {

TEST(UnicodeTables, NewerCodePointsPickTheWidenedPattern) {
  EXPECT_FALSE(has_newer_code_points("plain ascii text, long enough for the fast path"));
  EXPECT_FALSE(has_newer_code_points("\xF0\x9F\x98\x80 \xE4\xBD\xA0"));  // U+1F600, U+4F60: Unicode 14
  EXPECT_TRUE(has_newer_code_points("abcdefghijkl \xF0\x9F\xAB\xA8"));   // U+1FAE8: Unicode 15
  EXPECT_TRUE(has_newer_code_points("\xE1\xB2\x89"));                    // U+1C89: Unicode 16
  const Regex symbol("\\p{S}");
  Span m{};
  EXPECT_FALSE(symbol.search("\xF0\x9F\xAB\xA8", 0, m, UnicodeTables::kSystem));
  EXPECT_TRUE(symbol.search("\xF0\x9F\xAB\xA8", 0, m, UnicodeTables::kNewer));
  EXPECT_TRUE(symbol.search("\xF0\x9F\x98\x80", 0, m, UnicodeTables::kSystem));
}

}  // namespace
}  // namespace spark

namespace spark {
namespace {

Pieces pre_of(const std::string& steps_json, std::string_view text) {
  const PreTokenizer pre = PreTokenizer::from_json(
      nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [)" + steps_json +
                            R"(, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})"));
  return split_with(pre, text);
}

TEST(PunctuationPreTokenizer, AsciiAndUnicodePunctuationWithEachBehavior) {
  // ASCII punctuation includes symbols such as $ + < = > ^ ` | ~; Unicode's P* adds e.g. « » 、.
  EXPECT_EQ(pre_of(R"({"type": "Punctuation"})",
                   "a+b=c, d\xC2\xAB"
                   "e\xC2\xBB!"),
            (Pieces{"a", "+", "b", "=", "c", ",", " d", "\xC2\xAB", "e", "\xC2\xBB", "!"}));
  EXPECT_EQ(pre_of(R"({"type": "Punctuation", "behavior": "Contiguous"})", "wait...ok?!"),
            (Pieces{"wait", "...", "ok", "?!"}));
  EXPECT_EQ(pre_of(R"({"type": "Punctuation", "behavior": "Removed"})", "a,b;c"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(pre_of(R"({"type": "Punctuation", "behavior": "MergedWithPrevious"})", "a,b."),
            (Pieces{"a,", "b."}));
  // A currency or math symbol outside ASCII is not punctuation (\p{S}, not \p{P}).
  EXPECT_EQ(pre_of(R"({"type": "Punctuation"})", "5\xE2\x82\xAC"), (Pieces{"5\xE2\x82\xAC"}));
}

TEST(WhitespacePreTokenizer, WordsAndOtherRunsWithoutTheWhitespace) {
  EXPECT_EQ(
      pre_of(R"({"type": "Whitespace"})", "Hey man!! How's it\tgoing?\xE3\x80\x80\xE4\xBD\xA0\xE5\xA5\xBD"),
      (Pieces{"Hey", "man", "!!", "How", "'", "s", "it", "going", "?", "\xE4\xBD\xA0\xE5\xA5\xBD"}));
  EXPECT_EQ(pre_of(R"({"type": "Whitespace"})", "   "), Pieces{});
  EXPECT_EQ(pre_of(R"({"type": "Whitespace"})", "snake_case x2"), (Pieces{"snake_case", "x2"}));
}

TEST(WhitespaceSplitPreTokenizer, SplitsOnUnicodeWhiteSpaceOnly) {
  EXPECT_EQ(pre_of(R"({"type": "WhitespaceSplit"})", " a  b\n\u00a0c!d \u3000"), (Pieces{"a", "b", "c!d"}));
  // U+200B (zero width space) and U+180E are not White_Space.
  EXPECT_EQ(pre_of(R"({"type": "WhitespaceSplit"})", "a\u200Bb\u180Ec"), (Pieces{"a\u200Bb\u180Ec"}));
}

}  // namespace
}  // namespace spark
