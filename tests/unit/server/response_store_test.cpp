// The /v1/responses store: least recently used entries go first, both the count and the byte bound hold,
// an entry larger than the byte bound is refused, and a zero bound turns the store off.
#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace spark {
namespace {

StoredResponse entry(const std::string& text, size_t pad = 0) {
  StoredResponse r;
  r.response = nlohmann::ordered_json::object();
  r.response["id"] = text;
  r.response["output"] = nlohmann::ordered_json::array();
  r.response["output"].push_back(nlohmann::ordered_json::object());
  r.response["output"][0]["type"] = "message";
  r.response["output"][0]["text"] = std::string(pad, 'x');
  r.input_items = nlohmann::ordered_json::array();
  r.input_items.push_back(nlohmann::ordered_json::object());
  r.input_items[0]["id"] = "msg_" + text;
  return r;
}

TEST(ResponseStore, EvictsLeastRecentlyUsedByCount) {
  ResponseStore store(2, 1 << 20);
  EXPECT_TRUE(store.put("a", entry("a")));
  EXPECT_TRUE(store.put("b", entry("b")));
  ASSERT_TRUE(store.get("a").has_value());  // a is now the most recently used
  EXPECT_TRUE(store.put("c", entry("c")));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.get("a").has_value());
  EXPECT_FALSE(store.get("b").has_value());
  EXPECT_TRUE(store.get("c").has_value());
}

TEST(ResponseStore, HoldsTheByteBound) {
  const size_t one = [] {
    ResponseStore probe(10, 1 << 20);
    probe.put("a", entry("a", 1000));
    return probe.bytes();
  }();
  ASSERT_GT(one, 1000u);
  ResponseStore store(100, 2 * one + one / 2);  // room for two, not three
  store.put("a", entry("a", 1000));
  store.put("b", entry("b", 1000));
  store.put("c", entry("c", 1000));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_LE(store.bytes(), 2 * one + one / 2);
  EXPECT_FALSE(store.get("a").has_value());
  // Larger than the whole bound: refused, and nothing else is evicted for it.
  EXPECT_FALSE(store.put("huge", entry("huge", 10 * one)));
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStore, ReplaceEraseAndConversation) {
  ResponseStore store(4, 1 << 20);
  store.put("a", entry("a", 10));
  const size_t before = store.bytes();
  store.put("a", entry("a", 500));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_GT(store.bytes(), before);
  const auto got = store.get("a");
  ASSERT_TRUE(got.has_value());
  const auto conversation = got->conversation();  // input items, then output items
  ASSERT_EQ(conversation.size(), 2u);
  EXPECT_EQ(conversation[0]["id"].get<std::string>(), "msg_a");
  EXPECT_EQ(conversation[1]["type"].get<std::string>(), "message");
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, ZeroBoundDisables) {
  ResponseStore no_count(0, 1 << 20), no_bytes(10, 0);
  EXPECT_FALSE(no_count.enabled());
  EXPECT_FALSE(no_count.put("a", entry("a")));
  EXPECT_FALSE(no_bytes.put("a", entry("a")));
  EXPECT_FALSE(no_count.get("a").has_value());
}

}  // namespace
}  // namespace spark
