// The two helpers every OpenAI request parser uses: a 400 naming the parameter, and a field that counts as
// absent when it is null (as OpenAI's and vLLM's parsers treat `"stop": null` and the like).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"

namespace spark::request_fields {

[[noreturn]] inline void bad(const std::string& param, const std::string& what) {
  throw ApiError::bad_request("'" + param + "' " + what, param);
}

inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace spark::request_fields
