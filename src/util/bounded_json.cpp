#include "util/bounded_json.h"

#include <string>

namespace spark {

std::optional<size_t> json_depth_violation(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

template <class BasicJson>
BasicJson parse_json_bounded(std::string_view text, int max_depth) {
  if (auto at = json_depth_violation(text, max_depth)) {
    throw nlohmann::json::parse_error::create(
        101, *at + 1, "syntax error: JSON nested deeper than " + std::to_string(max_depth) + " levels",
        nullptr);
  }
  return BasicJson::parse(text);
}

template <class BasicJson>
BasicJson parse_json_bounded_or_discarded(std::string_view text, int max_depth) {
  if (json_depth_violation(text, max_depth)) return BasicJson(BasicJson::value_t::discarded);
  return BasicJson::parse(text, nullptr, false);
}

template nlohmann::json parse_json_bounded<nlohmann::json>(std::string_view, int);
template nlohmann::ordered_json parse_json_bounded<nlohmann::ordered_json>(std::string_view, int);
template nlohmann::json parse_json_bounded_or_discarded<nlohmann::json>(std::string_view, int);
template nlohmann::ordered_json parse_json_bounded_or_discarded<nlohmann::ordered_json>(std::string_view,
                                                                                        int);

}  // namespace spark
