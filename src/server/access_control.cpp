#include "server/access_control.h"

#include <string>

namespace spark {

namespace {

// Branch-free over the expected value's length: no early exit on the first differing byte.
bool constant_time_equal(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

}  // namespace

bool api_key_matches(std::string_view authorization, std::string_view key) {
  if (key.empty()) return false;
  const std::string expected = "Bearer " + std::string(key);
  return constant_time_equal(authorization, expected);
}

bool route_needs_api_key(std::string_view path, bool metrics_public) {
  // Deny by default: a route added later is guarded unless it is named here.
  if (path == "/health") return false;
  if (path == "/metrics") return !metrics_public;
  return true;
}

}  // namespace spark
