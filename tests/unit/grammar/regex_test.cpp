#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "spark/error.h"

namespace spark::grammar {
namespace {

bool full(const std::string& pattern, const std::string& text) {
  return grammar_matches(regex_grammar(pattern), text);
}

std::string regex_error(const std::string& p) {
  try {
    regex_grammar(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GrammarRegex, LiteralsClassesAndQuantifiers) {
  EXPECT_TRUE(full("abc", "abc"));
  EXPECT_FALSE(full("abc", "abcd"));
  EXPECT_FALSE(full("abc", "ab"));
  EXPECT_TRUE(full("a[0-9]+z", "a123z"));
  EXPECT_FALSE(full("a[0-9]+z", "az"));
  EXPECT_TRUE(full("a[^0-9]z", "axz"));
  EXPECT_FALSE(full("a[^0-9]z", "a5z"));
  EXPECT_TRUE(full("x{2,3}", "xx"));
  EXPECT_TRUE(full("x{2,3}", "xxx"));
  EXPECT_FALSE(full("x{2,3}", "xxxx"));
  EXPECT_FALSE(full("x{2,3}", "x"));
  EXPECT_TRUE(full("x{2,}", "xxxxxxx"));
  EXPECT_TRUE(full("x{2}", "xx"));
  EXPECT_TRUE(full("(ab|cd)*e?", "abcdab"));
  EXPECT_TRUE(full("(?:ab|cd)*e?", "abcde"));
  EXPECT_FALSE(full("(ab|cd)*", "abc"));
  EXPECT_TRUE(full("\\d\\w\\s\\.", "7_ ."));
  EXPECT_FALSE(full("\\d", "a"));
  EXPECT_TRUE(full("\\D\\W\\S", "a-x"));
  EXPECT_TRUE(full("a.c",
                   "a\xC3\xA9"
                   "c"));  // . is one code point, however many bytes
  EXPECT_FALSE(full("a.c", "a\nc"));
  EXPECT_TRUE(full("[\\u00e0-\\u00ff]+", "\xC3\xA9\xC3\xA0"));
  EXPECT_TRUE(full("\\x41\\u0042", "AB"));
  EXPECT_TRUE(full("a{,2}", "a{,2}"));  // not a repetition: literal braces
  EXPECT_TRUE(full("[a-c-]+", "a-c"));
  EXPECT_TRUE(full("(?<year>[0-9]{4})", "2024"));
}

TEST(GrammarRegex, UnicodeRangesSpanEncodingLengths) {
  const std::string p = "[\\u0070-\\u3000]";
  EXPECT_TRUE(full(p, "p"));
  EXPECT_TRUE(full(p, "\xC2\x80"));      // U+0080
  EXPECT_TRUE(full(p, "\xDF\xBF"));      // U+07FF
  EXPECT_TRUE(full(p, "\xE0\xA0\x80"));  // U+0800
  EXPECT_TRUE(full(p, "\xE3\x80\x80"));  // U+3000
  EXPECT_FALSE(full(p, "\xE3\x80\x81"));
  EXPECT_FALSE(full(p, "o"));
  EXPECT_FALSE(full("[^a]", "\xED\xA0\x80"));  // a surrogate is not a character
  EXPECT_TRUE(full("[^a]", "\xF0\x9F\x98\x80"));
}

TEST(GrammarRegex, UnsupportedSyntaxIsAnErrorNamingIt) {
  EXPECT_NE(regex_error("(a)\\1").find("backreference"), std::string::npos);
  EXPECT_NE(regex_error("a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(regex_error("\\bword").find("word boundar"), std::string::npos);
  EXPECT_NE(regex_error("a(b").find("missing ')'"), std::string::npos);
  EXPECT_NE(regex_error("a)").find("unbalanced"), std::string::npos);
  EXPECT_NE(regex_error("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(regex_error("[a").find("unterminated"), std::string::npos);
  EXPECT_NE(regex_error("a^b").find("'^'"), std::string::npos);
}

TEST(GrammarRegex, GroupNestingIsBoundedAndNamedShortly) {
  // 400 000 nested groups (0.8 MB, a request's structured_outputs.regex or a schema pattern) overflowed the
  // stack of the recursive parser: a crash of the server from one request.
  auto nested = [](size_t n, const std::string& open) {
    std::string p;
    for (size_t i = 0; i < n; ++i) p += open;
    return p + "a" + std::string(n, ')');
  };
  EXPECT_TRUE(grammar_matches(regex_grammar(nested(128, "(")), "a"));
  EXPECT_TRUE(grammar_matches(regex_grammar(nested(128, "(?:")), "a"));
  for (const char* open : {"(", "(?:", "(?<n>"}) {
    const std::string e = regex_error(nested(400000, open));
    EXPECT_NE(e.find("groups nested deeper than 128 levels"), std::string::npos) << e.substr(0, 200);
    EXPECT_LT(e.size(), 200u);  // names the pattern's start and the offset, not the megabyte
  }
  EXPECT_NE(regex_error(nested(129, "(")).find("at offset"), std::string::npos);
  EXPECT_NE(regex_error("((a)").find("pattern /((a)/: missing ')'"), std::string::npos);  // short: whole
}

TEST(GrammarRegex, AQuantifierMayNotFollowAQuantifier) {
  // As ECMA-262 and Python: each stacked quantifier wrapped the expression once more (300 000 '*' overflowed
  // the stack of every recursive pass over it). Lazy forms and a literal '{' stay.
  for (const char* p : {"a**", "a+*", "a?*", "a{2}{3}", "a{2,}*", "a*{1}", "a??*", "(ab){1,2}?{3}"}) {
    EXPECT_NE(regex_error(p).find("nothing to repeat"), std::string::npos) << p;
  }
  EXPECT_NE(regex_error("a" + std::string(300000, '*')).find("nothing to repeat"), std::string::npos);
  EXPECT_TRUE(grammar_matches(regex_grammar("a*?b"), "aab"));
  EXPECT_TRUE(grammar_matches(regex_grammar("a{2}?"), "aa"));
  EXPECT_TRUE(grammar_matches(regex_grammar("a*{"), "aa{"));
  EXPECT_TRUE(grammar_matches(regex_grammar("a+{x}"), "a{x}"));
}

TEST(GrammarRegex, RepeatedClassesAndAlternativesAreBuiltOnce) {
  // A '.' in a JSON string is hundreds of expression nodes (each character also as its escapes): 400 000
  // of them, built one each, held gigabytes before the automaton's bound could refuse the pattern. Equal
  // alternatives were found by a scan per option (400 000: 10 s).
  GrammarBuilder one, many;
  compile_regex(one, ".", {true, true});
  compile_regex(many, std::string(1000, '.'), {true, true});
  EXPECT_LT(many.node_count(), one.node_count() + 1000 * 4) << one.node_count();
  std::string alts = "a";
  for (int i = 0; i < 200000; ++i) alts += "|a";
  EXPECT_TRUE(full(alts, "a"));
  EXPECT_FALSE(full(alts, "aa"));
}

// The classic catastrophic pattern for backtracking engines runs in linear time here. A backtracking engine
// takes about 2^20000 steps on this text, so the bound only needs to be finite: it sits far above the
// milliseconds the linear walk takes, even under a sanitizer on a loaded machine.
TEST(GrammarRegex, NoBacktrackingBlowUp) {
  const auto g = regex_grammar("(a+)+b");
  const std::string text(20000, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(grammar_matches(g, text));
  EXPECT_TRUE(grammar_matches(g, text + "b"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 60.0);
}

// Many heads at once (past the matcher's hash-indexed head sets, 16) must match what std::regex matches.
TEST(GrammarRegex, ManyHeadsAgreeWithStdRegex) {
  std::mt19937 rng(3);
  for (const std::string pattern : {"[ab]*a[ab]{20}", "[abc]*(a[abc]{6}|b[abc]{9}|c[abc]{12})c?",
                                    "(a|ab|b)*(ba|b){3}[ab]{14}", "x?[ab]*a[ab]{17}x?"}) {
    const auto g = regex_grammar(pattern);
    const std::regex reference(pattern, std::regex::ECMAScript);
    int matched = 0;
    for (int i = 0; i < 400; ++i) {
      std::string text;
      const int len = static_cast<int>(rng() % 40);
      for (int k = 0; k < len; ++k) text.push_back("abbcx"[rng() % (i % 2 ? 5 : 2)]);
      const bool expected = std::regex_match(text, reference);
      matched += expected;
      ASSERT_EQ(grammar_matches(g, text), expected) << pattern << " on '" << text << "'";
    }
    EXPECT_GT(matched, 10) << pattern;  // both answers were tried
  }
}

// Closures grow with the square of a run of optional parts: bounded, an error rather than gigabytes.
TEST(GrammarRegex, ClosureSizeIsBounded) {
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "(.*)";
  try {
    regex_grammar(many);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epsilon closures"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(full("(.*)(.*)(.*)(.*)(.*)(.*)(.*)(.*)", "a,b"));  // a few are nothing
}

// JSON Schema `pattern`: a search unless anchored, over the JSON-escaped text of the string.
TEST(GrammarRegex, SchemaPatternSearchSemantics) {
  auto ok = [](const std::string& pattern, const std::string& json_text) {
    const std::string schema = nlohmann::json{{"type", "string"}, {"pattern", pattern}}.dump();
    return grammar_matches(compile_json_schema(schema), json_text);
  };
  EXPECT_TRUE(ok("b+", "\"abbbc\""));
  EXPECT_FALSE(ok("^b+", "\"abbbc\""));
  EXPECT_TRUE(ok("^a", "\"abbbc\""));
  EXPECT_FALSE(ok("c$|^x", "\"abbbcd\""));
  EXPECT_TRUE(ok("c$|^x", "\"xyz\""));
  EXPECT_TRUE(ok("^a\"b$", "\"a\\\"b\""));  // the quote comes escaped
  EXPECT_FALSE(ok("^a\"b$", "\"a\"b\""));
  EXPECT_TRUE(ok("^a\\nb$", "\"a\\nb\""));
  EXPECT_TRUE(ok("^[^x]$", "\"\\\\\""));  // a backslash, escaped
}

}  // namespace
}  // namespace spark::grammar
