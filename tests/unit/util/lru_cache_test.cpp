// The cache behind grammars, shared automata and stored responses: both bounds hold, least recently used
// entries leave first, an entry costing more than the budget is refused, and re-measuring evicts.
#include "util/lru_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace spark::util {
namespace {

TEST(LruCache, EvictsTheLeastRecentlyUsedByCount) {
  LruCache<std::string, int> cache(2, 1000);
  EXPECT_TRUE(cache.put("a", 1, 10));
  EXPECT_TRUE(cache.put("b", 2, 10));
  EXPECT_EQ(cache.get("a"), 1);  // a is now the most recently used
  EXPECT_TRUE(cache.put("c", 3, 10));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get("b"), std::nullopt);
  EXPECT_EQ(cache.get("a"), 1);
  EXPECT_EQ(cache.get("c"), 3);
  EXPECT_EQ(cache.cost(), 20u);
}

TEST(LruCache, EvictsTheLeastRecentlyUsedByCost) {
  LruCache<int, int> cache(100, 25);
  cache.put(1, 1, 10);
  cache.put(2, 2, 10);
  cache.put(3, 3, 10);  // 30 > 25: 1, the oldest, leaves
  EXPECT_EQ(cache.get(1), std::nullopt);
  EXPECT_EQ(cache.get(2), 2);  // 2 is now the most recent
  cache.put(4, 4, 10);         // so 3 leaves
  EXPECT_EQ(cache.get(3), std::nullopt);
  EXPECT_EQ(cache.get(2), 2);
  EXPECT_EQ(cache.get(4), 4);
  EXPECT_EQ(cache.cost(), 20u);
  // Costing more than the whole budget: refused, and nothing else leaves for it.
  EXPECT_FALSE(cache.put(5, 5, 26));
  EXPECT_EQ(cache.get(5), std::nullopt);
  EXPECT_EQ(cache.size(), 2u);
  // One that fits only alone empties the rest.
  EXPECT_TRUE(cache.put(6, 6, 25));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.cost(), 25u);
}

TEST(LruCache, ReplaceEraseAndZeroBounds) {
  LruCache<std::string, std::string> cache(4, 100);
  cache.put("a", "small", 5);
  cache.put("a", "larger", 50);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.cost(), 50u);
  EXPECT_EQ(cache.get("a"), "larger");
  EXPECT_FALSE(cache.put("a", "too large", 101));  // the replaced entry is gone all the same
  EXPECT_EQ(cache.size(), 0u);
  cache.put("b", "x", 1);
  EXPECT_TRUE(cache.erase("b"));
  EXPECT_FALSE(cache.erase("b"));
  EXPECT_EQ(cache.cost(), 0u);
  LruCache<int, int> no_count(0, 100), no_cost(10, 0);
  EXPECT_FALSE(no_count.put(1, 1, 0));
  EXPECT_FALSE(no_cost.put(1, 1, 1));
  EXPECT_EQ(no_count.size() + no_cost.size(), 0u);
}

TEST(LruCache, RecostAndNewLimitsEvict) {
  LruCache<int, int> cache(10, 100);
  for (int i = 0; i < 5; ++i) cache.put(i, i, 10);
  EXPECT_EQ(cache.get(0), 0);  // order, most recent first: 0 4 3 2 1
  cache.recost([](const int&, const int& v) { return static_cast<size_t>(v) * 10; });  // 0 10 20 30 40
  EXPECT_EQ(cache.cost(), 100u);
  cache.recost([](const int&, const int& v) { return static_cast<size_t>(v) * 20; });  // 0 20 40 60 80
  // 200 > 100: 1 (20), 2 (40) and 3 (60) leave, the least recently used first, until 4 (80) and 0 fit.
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get(4), 4);
  EXPECT_EQ(cache.get(0), 0);
  EXPECT_EQ(cache.cost(), 80u);
  cache.set_limits(1, 100);  // 4 is now the least recently used
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.get(0), 0);
}

}  // namespace
}  // namespace spark::util
