// The byte-bounded cache of shared automata (util::LruCache): tables in use stay valid past it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace spark::grammar {
namespace {

TEST(CountedStringTables, LengthBoundedStringsStayWithinTheBudget) {
  // Every distinct length bound builds a table that the whole process shares; a stream of schemas naming
  // new bounds must not grow memory without end (a table of 200 characters is a few hundred KB).
  DfaTableCache& cache = counted_string_tables();
  const size_t budget = size_t{2} << 20;
  cache.set_limits(cache.max_count(), budget);
  std::vector<Grammar> kept;
  for (int max_len = 200; max_len < 216; ++max_len) {
    kept.push_back(
        compile_json_schema(R"({"type": "string", "maxLength": )" + std::to_string(max_len) + "}"));
    EXPECT_LE(cache.cost(), budget);
  }
  EXPECT_GT(cache.size(), 0u);
  EXPECT_LT(cache.size(), kept.size());
  // Grammars whose tables have left the cache still enforce their bounds.
  for (size_t i = 0; i < kept.size(); ++i) {
    const size_t max_len = 200 + i;
    EXPECT_TRUE(grammar_matches(kept[i], "\"" + std::string(max_len, 'a') + "\"")) << max_len;
    EXPECT_FALSE(grammar_matches(kept[i], "\"" + std::string(max_len + 1, 'a') + "\"")) << max_len;
  }
  cache.set_limits(cache.max_count(), size_t{64} << 20);
}

}  // namespace
}  // namespace spark::grammar
