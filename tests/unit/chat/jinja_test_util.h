// Helpers for the chat-template engine tests: render a template text with a JSON context, or capture the
// TemplateError it throws.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"

namespace spark::test {

inline std::string render(const std::string& source, const std::string& context_json = "{}",
                          const ChatTemplateLimits& limits = {}) {
  return ChatTemplate(source).render(nlohmann::ordered_json::parse(context_json), limits);
}

// The error rendering (or parsing) throws; fails the test if there is none.
inline std::optional<TemplateError> render_error(const std::string& source,
                                                 const std::string& context_json = "{}",
                                                 const ChatTemplateLimits& limits = {}) {
  try {
    const std::string out = render(source, context_json, limits);
    ADD_FAILURE() << "expected an error, got output: " << out;
  } catch (const TemplateError& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace spark::test
