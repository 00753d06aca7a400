// The process-wide cache of compiled grammars is bounded by bytes as well as by count: a client sending
// many large schemas, or one grammar whose caches grow while requests use it, cannot grow the server
// without end. Grammars that leave the cache keep working for the requests holding them.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/structured_output.h"

namespace spark {
namespace {

// The end token, every byte and a few words.
std::shared_ptr<const grammar::TokenVocab> vocab() {
  std::vector<std::string> t{""};
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  for (const char* s : {"{\"", "\":", "\", \"", "\"}", "name", "value", "true", "12", "  "})
    t.emplace_back(s);
  return std::make_shared<const grammar::TokenVocab>(std::move(t), std::vector<int32_t>{0});
}

StructuredOutput schema_with(int properties, int salt) {
  std::string spec = R"({"type": "object", "properties": {)";
  for (int i = 0; i < properties; ++i) {
    if (i) spec += ", ";
    spec += "\"p" + std::to_string(salt) + "_" + std::to_string(i) + R"(": {"type": "integer"})";
  }
  spec += "}}";
  return {StructuredOutput::Kind::kJsonSchema, spec, {}, "response_format"};
}

struct RestoreLimits {
  ~RestoreLimits() { set_grammar_cache_limits(kDefaultGrammarCacheCount, kDefaultGrammarCacheBytes); }
};

TEST(GrammarCache, StaysWithinItsByteBound) {
  const RestoreLimits restore;
  const auto v = vocab();
  set_grammar_cache_limits(kDefaultGrammarCacheCount, 0);  // empties it
  const size_t one = compile_structured_output(schema_with(40, -1), v)->memory_bytes();
  ASSERT_GT(one, 10'000u);
  const size_t budget = 4 * one;
  set_grammar_cache_limits(kDefaultGrammarCacheCount, budget);
  std::vector<std::shared_ptr<const grammar::CompiledGrammar>> held;
  for (int salt = 0; salt < 20; ++salt) {
    held.push_back(compile_structured_output(schema_with(40, salt), v));
    EXPECT_LE(grammar_cache_stats().bytes, budget);
  }
  EXPECT_GE(grammar_cache_stats().grammars, 2u);
  EXPECT_LT(grammar_cache_stats().grammars, 8u);  // far below the count bound: bytes decide
  // A grammar that left the cache still enforces its schema.
  grammar::GrammarMatcher m(held.front());
  EXPECT_TRUE(m.advance(R"({"p0_0": 12})"));
  EXPECT_FALSE(m.advance("x"));
}

TEST(GrammarCache, GrowthWhileInUseIsCountedAtTheNextInsertion) {
  const RestoreLimits restore;
  const auto v = vocab();
  set_grammar_cache_limits(kDefaultGrammarCacheCount, 0);
  set_grammar_cache_limits(kDefaultGrammarCacheCount, kDefaultGrammarCacheBytes);
  const auto g = compile_structured_output(schema_with(30, 100), v);
  const size_t at_insertion = grammar_cache_stats().bytes;
  // A request's matcher walks the document: each new state's mask joins the grammar's caches.
  grammar::GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  std::string doc = "{";
  for (int i = 0; i < 30; ++i) doc += (i ? ", " : "") + std::string("\"p100_") + std::to_string(i) + "\": 12";
  doc += "}";
  for (const char c : doc) {
    m.fill_mask(bits);
    ASSERT_TRUE(m.advance(std::string(1, c)));
  }
  const size_t grown = g->memory_bytes();
  ASSERT_GT(grown, at_insertion);
  compile_structured_output(schema_with(1, 101), v);  // any insertion measures the others again
  EXPECT_GE(grammar_cache_stats().bytes, grown);
  // With a bound below the grown grammar and the newcomer together, the older one leaves.
  set_grammar_cache_limits(kDefaultGrammarCacheCount, grown);
  EXPECT_EQ(grammar_cache_stats().grammars, 1u);
}

TEST(GrammarCache, RefusedSpecsAreRefusedAgainWithoutACompile) {
  // (a{1000}){10000} needs 20 million states, past the grammar bound: a 400. The refusal is kept by its spec,
  // so the next request with it is answered without building the grammar again (a costly refused schema
  // sent over and over costs one compile), under whichever parameter it comes; another vocabulary is
  // another key.
  const auto v = vocab();
  const auto refusal = [](const std::shared_ptr<const grammar::TokenVocab>& with, const std::string& param) {
    try {
      compile_structured_output({StructuredOutput::Kind::kRegex, "(a{1000}){10000}", {}, param}, with);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param);
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  const GrammarCacheStats before = grammar_cache_stats();
  const std::string first = refusal(v, "structured_outputs");
  EXPECT_EQ(first.rfind("'structured_outputs' cannot be enforced: grammar too large", 0), 0u) << first;
  EXPECT_EQ(grammar_cache_stats().refusals, before.refusals + 1);
  EXPECT_EQ(grammar_cache_stats().compiles, before.compiles + 1);
  EXPECT_EQ(refusal(v, "structured_outputs"), first);
  const std::string other = refusal(v, "guided_regex");
  EXPECT_EQ(other, "'guided_regex'" + first.substr(first.find(' ')));
  EXPECT_EQ(grammar_cache_stats().compiles, before.compiles + 1);
  EXPECT_EQ(grammar_cache_stats().refusals, before.refusals + 1);
  EXPECT_EQ(refusal(vocab(), "structured_outputs"), first);
  EXPECT_EQ(grammar_cache_stats().compiles, before.compiles + 2);
  EXPECT_EQ(grammar_cache_stats().refusals, before.refusals + 2);
  EXPECT_EQ(grammar_cache_stats().compiles_waiting_for_equal, 0u);
}

}  // namespace
}  // namespace spark
