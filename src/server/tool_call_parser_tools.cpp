#include "server/tool_call_parser_tools.h"

#include <cmath>

#include "spark/error.h"
#include "util/bounded_json.h"

namespace spark {

namespace {

uint8_t type_bit(std::string_view name) {
  if (name == "string") return kJsonString;
  if (name == "integer") return kJsonInteger;
  if (name == "number") return kJsonNumber;
  if (name == "boolean") return kJsonBoolean;
  if (name == "null") return kJsonNull;
  if (name == "object") return kJsonObject;
  if (name == "array") return kJsonArray;
  return 0;
}

template <typename Json>
uint8_t value_type_bit(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      return kJsonString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kJsonInteger;
    case Json::value_t::number_float:
      return kJsonNumber;
    case Json::value_t::boolean:
      return kJsonBoolean;
    case Json::value_t::null:
      return kJsonNull;
    case Json::value_t::object:
      return kJsonObject;
    case Json::value_t::array:
      return kJsonArray;
    default:
      return 0;
  }
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

const nlohmann::ordered_json* first_member(const nlohmann::ordered_json& object,
                                           std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end()) return &*it;
  }
  return nullptr;
}

}  // namespace

uint8_t schema_types(const nlohmann::json& schema) {
  if (!schema.is_object()) return 0;
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) return type_bit(it->get<std::string>());
    if (it->is_array()) {
      uint8_t types = 0;
      for (const auto& t : *it) {
        if (t.is_string()) types |= type_bit(t.get<std::string>());
      }
      return types;
    }
    return 0;
  }
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array() && !it->empty()) {
    uint8_t types = 0;
    for (const auto& v : *it) types |= value_type_bit(v);
    return types;
  }
  if (auto it = schema.find("const"); it != schema.end()) return value_type_bit(*it);
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array() && !it->empty()) {
      uint8_t types = 0;
      for (const auto& branch : *it) {
        const uint8_t t = schema_types(branch);
        if (t == 0) return 0;  // one unconstrained branch makes the whole union unconstrained
        types |= t;
      }
      return types;
    }
  }
  if (schema.contains("properties")) return kJsonObject;
  return 0;
}

bool json_matches_types(const nlohmann::ordered_json& value, uint8_t types) {
  const uint8_t bit = value_type_bit(value);
  if (bit & types) return true;
  if (bit == kJsonInteger && (types & kJsonNumber)) return true;
  if (bit == kJsonNumber && (types & kJsonInteger)) {
    const double d = value.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

const nlohmann::json* ToolInfo::param_schema(std::string_view key) const {
  if (!parameters.is_object()) return nullptr;
  auto props = parameters.find("properties");
  if (props == parameters.end() || !props->is_object()) return nullptr;
  auto it = props->find(key);
  return it == props->end() ? nullptr : &*it;
}

uint8_t ToolInfo::param_types(std::string_view key) const {
  const nlohmann::json* schema = param_schema(key);
  return schema ? schema_types(*schema) : 0;
}

ToolRegistry::ToolRegistry(const nlohmann::json& tools) {
  if (tools.is_null()) return;
  if (!tools.is_array()) throw Error("'tools' must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& entry = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!entry.is_object()) throw Error(where + " must be an object");
    if (auto type = entry.find("type"); type != entry.end() && *type != "function") {
      throw Error(where + ".type must be \"function\"");
    }
    auto function = entry.find("function");
    if (function == entry.end() || !function->is_object()) throw Error(where + ".function must be an object");
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get<std::string>().empty()) {
      throw Error(where + ".function.name must be a non-empty string");
    }
    ToolInfo info{name->get<std::string>(), nullptr};
    if (auto params = function->find("parameters"); params != function->end() && !params->is_null()) {
      if (!params->is_object()) throw Error(where + ".function.parameters must be an object");
      info.parameters = *params;
    }
    // The first declaration of a name wins, as it does in the rendered prompt's reading order.
    if (by_name_.emplace(info.name, tools_.size()).second) tools_.push_back(std::move(info));
  }
}

const ToolInfo* ToolRegistry::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tools_[it->second];
}

ArgumentValue convert_argument(std::string_view raw, uint8_t types) {
  if (types == kJsonString) return {nlohmann::ordered_json(std::string(raw)), ArgumentValue::Fit::kExact};
  const std::string_view text = trim(raw);
  nlohmann::ordered_json parsed = parse_json_bounded_or_discarded<nlohmann::ordered_json>(text);
  if (!parsed.is_discarded() && (types == 0 || json_matches_types(parsed, types))) {
    return {std::move(parsed), ArgumentValue::Fit::kExact};
  }
  if (types == 0 || (types & kJsonString)) {
    return {nlohmann::ordered_json(std::string(raw)), ArgumentValue::Fit::kExact};
  }
  // Python spellings are the usual slip.
  const std::string word = lower(text);
  if ((types & kJsonBoolean) && (word == "true" || word == "false")) {
    return {nlohmann::ordered_json(word == "true"), ArgumentValue::Fit::kCoerced};
  }
  if ((types & kJsonNull) && (word == "none" || word == "null")) {
    return {nlohmann::ordered_json(nullptr), ArgumentValue::Fit::kCoerced};
  }
  return {nlohmann::ordered_json(std::string(raw)), ArgumentValue::Fit::kMismatch};
}

void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
}

JsonCallShape interpret_call_object(const nlohmann::ordered_json& object, const ToolRegistry& tools) {
  JsonCallShape shape;
  if (!object.is_object()) return shape;
  const nlohmann::ordered_json* body = &object;
  if (auto fn = object.find("function"); fn != object.end() && fn->is_object()) body = &*fn;

  const nlohmann::ordered_json* name = first_member(*body, {"name", "tool", "tool_name", "function"});
  if (name == nullptr || !name->is_string()) return shape;

  const nlohmann::ordered_json* args = first_member(*body, {"arguments", "parameters", "args", "input"});
  if (args != nullptr) {
    shape.has_arguments = true;
    if (args->is_string()) {
      nlohmann::ordered_json parsed =
          parse_json_bounded_or_discarded<nlohmann::ordered_json>(args->get<std::string>());
      if (!parsed.is_object()) return shape;
      shape.arguments = std::move(parsed);
    } else if (args->is_object()) {
      shape.arguments = *args;
    } else {
      return shape;
    }
  }
  shape.name = name->get<std::string>();
  shape.kind = tools.find(shape.name) ? JsonCallShape::Kind::kCall : JsonCallShape::Kind::kUnknownTool;
  return shape;
}

}  // namespace spark
