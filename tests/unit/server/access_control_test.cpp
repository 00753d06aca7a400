#include "server/access_control.h"

#include <gtest/gtest.h>

namespace spark {
namespace {

TEST(AccessControl, ApiKeyMustMatchExactly) {
  EXPECT_TRUE(api_key_matches("Bearer sekret", "sekret"));
  EXPECT_FALSE(api_key_matches("Bearer sekreT", "sekret"));
  EXPECT_FALSE(api_key_matches("Bearer sekret2", "sekret"));  // longer
  EXPECT_FALSE(api_key_matches("Bearer sekre", "sekret"));    // a prefix
  EXPECT_FALSE(api_key_matches("sekret", "sekret"));          // no scheme
  EXPECT_FALSE(api_key_matches("bearer sekret", "sekret"));
  EXPECT_FALSE(api_key_matches("", "sekret"));
  EXPECT_FALSE(api_key_matches(std::string_view("Bearer sekret\0x", 15), "sekret"));
  EXPECT_FALSE(api_key_matches("Bearer ", ""));  // an empty key never matches (no key means no check)
}

TEST(AccessControl, EveryRouteButHealthNeedsTheKey) {
  for (const char* p : {"/v1/models", "/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize",
                        "/v1/embeddings", "/anything", "/"}) {
    EXPECT_TRUE(route_needs_api_key(p, false)) << p;
    EXPECT_TRUE(route_needs_api_key(p, true)) << p;
  }
  EXPECT_FALSE(route_needs_api_key("/health", false));
  EXPECT_TRUE(route_needs_api_key("/metrics", false));
  EXPECT_FALSE(route_needs_api_key("/metrics", true));
}

}  // namespace
}  // namespace spark
