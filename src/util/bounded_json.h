// JSON parsing with a bound on nesting depth, for every document that comes from outside the process
// (request bodies, tool-call arguments, tokenizer.json, config.json, safetensors headers). nlohmann's
// parser itself is iterative, but copying, comparing, dumping and converting a parsed value recurse once
// per level: `[[[[...` 100000 deep parses fine and then overflows the stack. The depth is checked by a
// linear pre-scan before any value is built.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace spark {

// Deep enough for any real request, tool schema or model file (they stay under 20 levels).
inline constexpr int kMaxJsonDepth = 128;

// The byte offset of the first '[' or '{' that opens level max_depth + 1, outside strings; nullopt when the
// text stays within max_depth. Exact for well-formed JSON; for malformed text the parser fails anyway.
std::optional<size_t> json_depth_violation(std::string_view text, int max_depth = kMaxJsonDepth);

// Like BasicJson::parse(text), but throws nlohmann::json::parse_error (id 101, at the offending byte) when
// the text nests deeper than max_depth, so existing `catch (parse_error&)` blocks report it like any other
// syntax error.
template <class BasicJson = nlohmann::json>
BasicJson parse_json_bounded(std::string_view text, int max_depth = kMaxJsonDepth);

// Like BasicJson::parse(text, nullptr, false): a discarded value (is_discarded()) for malformed or too deep
// text, never an exception.
template <class BasicJson = nlohmann::json>
BasicJson parse_json_bounded_or_discarded(std::string_view text, int max_depth = kMaxJsonDepth);

extern template nlohmann::json parse_json_bounded<nlohmann::json>(std::string_view, int);
extern template nlohmann::ordered_json parse_json_bounded<nlohmann::ordered_json>(std::string_view, int);
extern template nlohmann::json parse_json_bounded_or_discarded<nlohmann::json>(std::string_view, int);
extern template nlohmann::ordered_json parse_json_bounded_or_discarded<nlohmann::ordered_json>(
    std::string_view, int);

}  // namespace spark
