// Checks concrete JSON values against a JSON Schema. The grammar compiler uses it where a schema's instances
// are listed (enum / const): every sibling keyword is then checked on the listed values themselves, which is
// exact whatever the keyword (not, maxProperties, multipleOf...).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace spark::grammar {

// Private keywords the compiler rewrites `not` into: values the instance must not be (not: {enum / const}),
// and names an object must not have (not: {required: [name]}).
inline constexpr const char* kExclude =
    "\x01"
    "exclude";
inline constexpr const char* kAbsent =
    "\x01"
    "absent";

// Whether `value` is valid against `schema`; $refs resolve inside `root`. Throws spark::Error naming a
// keyword it cannot evaluate exactly.
bool json_valid(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema,
                const nlohmann::ordered_json& root);

// JSON Schema equality (numbers by value: 1 == 1.0; objects regardless of key order).
bool json_equal(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

// The target of a "#..." JSON pointer reference inside `root`. Throws spark::Error when it does not resolve.
const nlohmann::ordered_json& resolve_ref(const nlohmann::ordered_json& root, const std::string& ref);

// The regular expression of a string format the grammar enforces (date, time, date-time, email, uuid, uri,
// ipv4, ipv6, hostname), or nullptr for formats that only annotate.
const char* format_regex(const std::string& format);

// Whether the regular expression (JSON Schema `pattern` semantics: found anywhere unless anchored) matches.
bool pattern_matches(const std::string& pattern, const std::string& text);

}  // namespace spark::grammar
