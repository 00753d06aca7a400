// A small JSON-schema checker for the constraint tests (the subset tool schemas use: type, enum, const,
// properties, required, additionalProperties, items, minItems, maxItems). Written independently of the
// constraint so that the two can disagree. With strict_keys, an object may only hold declared properties.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace spark::test {

inline bool has_type(const nlohmann::ordered_json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

// Returns "" when `value` satisfies `schema`, else what is wrong and where.
inline std::string validate(const nlohmann::ordered_json& value, const nlohmann::json& schema,
                            bool strict_keys, const std::string& where = "$") {
  if (!schema.is_object()) return "";
  if (schema.contains("enum")) {
    for (const auto& e : schema["enum"]) {
      if (nlohmann::ordered_json::parse(e.dump()) == value) return "";
    }
    return where + ": " + value.dump() + " is not in the enum";
  }
  if (schema.contains("const") && nlohmann::ordered_json::parse(schema["const"].dump()) != value) {
    return where + ": not the const";
  }
  if (schema.contains("type")) {
    const auto& t = schema["type"];
    bool ok = false;
    if (t.is_string()) ok = has_type(value, t.get<std::string>());
    for (const auto& one : t.is_array() ? t : nlohmann::json::array())
      ok |= has_type(value, one.get<std::string>());
    if (!ok) return where + ": " + value.dump() + " is not of type " + t.dump();
  }
  if (value.is_object()) {
    const nlohmann::json props = schema.value("properties", nlohmann::json::object());
    for (const auto& r : schema.value("required", nlohmann::json::array())) {
      if (!value.contains(r.get<std::string>())) return where + ": missing required " + r.dump();
    }
    const auto required = schema.value("required", nlohmann::json::array());
    const bool closed = (strict_keys && schema.contains("properties")) ||
                        schema.value("additionalProperties", nlohmann::json(true)) == false;
    for (const auto& [key, member] : value.items()) {
      if (props.contains(key)) {
        std::string e = validate(member, props[key], strict_keys, where + "." + key);
        if (!e.empty()) return e;
      } else if (closed && std::find(required.begin(), required.end(), key) == required.end()) {
        return where + ": undeclared key " + key;
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      return where + ": too few";
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      return where + ": too many";
    if (schema.contains("items")) {
      for (size_t i = 0; i < value.size(); ++i) {
        std::string e =
            validate(value[i], schema["items"], strict_keys, where + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
    }
  }
  return "";
}

}  // namespace spark::test
