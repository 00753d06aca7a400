// The request's tools as the tool-call parser and the tool-call constraint need them: the names, and the
// JSON-schema type of every parameter, which decides how an `<arg_value>` text becomes a JSON value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace spark {

// JSON types as a bit set, since a schema's "type" may name several.
enum JsonTypeBit : uint8_t {
  kJsonString = 1,
  kJsonInteger = 2,
  kJsonNumber = 4,
  kJsonBoolean = 8,
  kJsonNull = 16,
  kJsonObject = 32,
  kJsonArray = 64,
};
constexpr uint8_t kJsonAnyType = 127;

// The types a schema admits, from "type", else "enum"/"const", else "anyOf"/"oneOf", else "properties";
// 0 when it does not say (which callers treat as "anything").
uint8_t schema_types(const nlohmann::json& schema);
// True when `value` is of one of the types in `types` (an integral float counts as an integer).
bool json_matches_types(const nlohmann::ordered_json& value, uint8_t types);

struct ToolInfo {
  std::string name;
  nlohmann::json parameters;  // the tool's parameters schema, or null when it declared none

  // The schema of one parameter, or nullptr when the tool does not declare it.
  const nlohmann::json* param_schema(std::string_view key) const;
  uint8_t param_types(std::string_view key) const;
};

class ToolRegistry {
 public:
  ToolRegistry() = default;
  // `tools` is the OpenAI request's `tools` array (null means none). Throws spark::Error, naming the entry,
  // when an entry is not {type: "function", function: {name, parameters?}}.
  explicit ToolRegistry(const nlohmann::json& tools);

  const ToolInfo* find(std::string_view name) const;
  const std::vector<ToolInfo>& tools() const { return tools_; }
  bool empty() const { return tools_.empty(); }

 private:
  std::vector<ToolInfo> tools_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

struct ArgumentValue {
  enum class Fit {
    kExact,     // the text is a value of the declared type
    kCoerced,   // the text was adjusted to the type (`True` for a boolean, `None` for null)
    kMismatch,  // the text fits no declared type and is kept as a string
  };
  nlohmann::ordered_json value;
  Fit fit = Fit::kExact;
};

// Converts an `<arg_value>` text by its parameter's type set: a string-only parameter keeps the raw text;
// otherwise JSON of a declared type; otherwise the raw text as a string when strings are allowed or the type
// is unknown (`types` == 0).
ArgumentValue convert_argument(std::string_view raw, uint8_t types);

// Appends `text` escaped as the body of a JSON string exactly as nlohmann::json::dump() does for valid
// UTF-8; bytes >= 0x80 pass through unchanged, so escaping a text in pieces equals escaping it whole.
void append_json_escaped(std::string& out, std::string_view text);

// What a JSON object written instead of the Spark syntax amounts to: {"name"|"tool"|"tool_name"|"function":
// NAME, "arguments"|"parameters"|"args"|"input": {...} or a JSON string of one}, or OpenAI's own
// {"type": "function", "function": {"name", "arguments"}}.
struct JsonCallShape {
  enum class Kind { kNone, kUnknownTool, kCall };
  Kind kind = Kind::kNone;
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  bool has_arguments = false;  // the object named its arguments (a bare object needs that to be a call)
};
JsonCallShape interpret_call_object(const nlohmann::ordered_json& object, const ToolRegistry& tools);

}  // namespace spark
