// The byte-bounded cache of shared automata: least recently used out first, tables in use stay valid.
#include "grammar/table_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace spark::grammar {
namespace {

std::shared_ptr<const DfaTable> table_of(size_t states) {
  auto t = std::make_shared<DfaTable>();
  t->edges.resize(states, std::vector<DfaTable::Edge>(4, DfaTable::Edge{'a', 'z', 0}));
  t->exit.assign(states, -1);
  return t;
}

TEST(DfaTableCache, DropsTheLeastRecentlyUsedPastItsBudget) {
  const auto a = table_of(100), b = table_of(100), c = table_of(100), d = table_of(100);
  const size_t one = dfa_table_bytes(*a);
  DfaTableCache cache(2 * one + one / 2);
  cache.insert({1, 0, false}, a);
  cache.insert({2, 0, false}, b);
  EXPECT_EQ(cache.size(), 2u);
  cache.insert({3, 0, false}, c);  // a, the oldest, leaves
  EXPECT_EQ(cache.find({1, 0, false}), nullptr);
  EXPECT_EQ(cache.find({2, 0, false}), b);  // b is now the most recent
  cache.insert({4, 0, false}, d);           // so c leaves
  EXPECT_EQ(cache.find({3, 0, false}), nullptr);
  EXPECT_EQ(cache.find({2, 0, false}), b);
  EXPECT_EQ(cache.find({4, 0, false}), d);
  EXPECT_EQ(cache.bytes(), 2 * one);
  cache.insert({5, 0, false}, table_of(1000));  // larger than the whole budget: not kept
  EXPECT_EQ(cache.find({5, 0, false}), nullptr);
  EXPECT_EQ(cache.bytes(), 2 * one);
  cache.set_budget(one);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_LE(cache.bytes(), one);
}

TEST(DfaTableCache, LengthBoundedStringsStayWithinTheBudget) {
  // Every distinct length bound builds a table that the whole process shares; a stream of schemas naming
  // new bounds must not grow memory without end (a table of 200 characters is a few hundred KB).
  DfaTableCache& cache = counted_string_tables();
  const size_t budget = size_t{2} << 20;
  cache.set_budget(budget);
  std::vector<Grammar> kept;
  for (int max_len = 200; max_len < 216; ++max_len) {
    kept.push_back(
        compile_json_schema(R"({"type": "string", "maxLength": )" + std::to_string(max_len) + "}"));
    EXPECT_LE(cache.bytes(), budget);
  }
  EXPECT_GT(cache.size(), 0u);
  EXPECT_LT(cache.size(), kept.size());
  // Grammars whose tables have left the cache still enforce their bounds.
  for (size_t i = 0; i < kept.size(); ++i) {
    const size_t max_len = 200 + i;
    EXPECT_TRUE(grammar_matches(kept[i], "\"" + std::string(max_len, 'a') + "\"")) << max_len;
    EXPECT_FALSE(grammar_matches(kept[i], "\"" + std::string(max_len + 1, 'a') + "\"")) << max_len;
  }
  cache.set_budget(size_t{64} << 20);
}

}  // namespace
}  // namespace spark::grammar
