// Pieces of the Spark tool-call syntax shared by the ToolCallParser sources (internal to the parser).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace spark::tool_syntax {

inline constexpr std::string_view kCallOpen = "<tool_call>";
inline constexpr std::string_view kCallClose = "</tool_call>";
inline constexpr std::string_view kKeyOpen = "<arg_key>";
inline constexpr std::string_view kKeyClose = "</arg_key>";
inline constexpr std::string_view kValueOpen = "<arg_value>";
inline constexpr std::string_view kValueClose = "</arg_value>";

inline bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

inline bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Which of `tags` the text starts with (its position in the list), or -1. `partial` is set when the text is
// a proper prefix of one of them, so that more input could still complete it; at the end of output nothing
// is partial.
inline int match_tag(std::string_view text, std::initializer_list<std::string_view> tags, bool eof,
                     bool& partial) {
  partial = false;
  int index = 0;
  for (std::string_view tag : tags) {
    if (text.starts_with(tag)) return index;
    if (!eof && text.size() < tag.size() && tag.starts_with(text)) partial = true;
    ++index;
  }
  return -1;
}

// Compact JSON; invalid UTF-8 (which the server should never feed) is replaced rather than thrown on.
inline std::string dump(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace spark::tool_syntax
