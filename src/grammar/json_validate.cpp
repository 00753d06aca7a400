#include "grammar/json_validate.h"

#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "spark/error.h"

namespace spark::grammar {

namespace {

using Json = nlohmann::ordered_json;

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_integer_value(const Json& v) {
  return v.is_number_integer() || v.is_number_unsigned() ||
         (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

bool type_is(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number() && is_integer_value(v);
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  throw Error("JSON Schema: unknown type '" + t + "'");
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}

  bool valid(const Json& v, const Json& s, int depth) {
    if (depth > 64) throw Error("JSON Schema nested too deeply to check enum values against");
    if (s.is_boolean()) return s.get<bool>();
    if (!s.is_object()) throw Error("JSON Schema: a schema must be an object or a boolean");
    for (auto& [k, x] : s.items()) {
      if (!keyword(k, x, v, s, depth)) return false;
    }
    return true;
  }

 private:
  static double num(const Json& x, const std::string& k) {
    if (!x.is_number()) throw Error("JSON Schema: " + k + " must be a number");
    return x.get<double>();
  }

  bool keyword(const std::string& k, const Json& x, const Json& v, const Json& s, int depth) {
    if (k == "$ref") return valid(v, resolve_ref(root_, x.get<std::string>()), depth + 1);
    if (k == "type") {
      if (x.is_string()) return type_is(v, x.get<std::string>());
      for (const auto& t : x) {
        if (type_is(v, t.get<std::string>())) return true;
      }
      return false;
    }
    if (k == "enum") {
      for (const auto& e : x) {
        if (json_equal(v, e)) return true;
      }
      return false;
    }
    if (k == "const") return json_equal(v, x);
    if (k == "allOf" || k == "anyOf" || k == "oneOf") {
      size_t n = 0;
      for (const auto& m : x) n += valid(v, m, depth + 1);
      return k == "allOf" ? n == x.size() : k == "anyOf" ? n > 0 : n == 1;
    }
    if (k == "not") return !valid(v, x, depth + 1);
    if (k == kExclude) {
      for (const auto& e : x) {
        if (json_equal(v, e)) return false;
      }
      return true;
    }
    if (k == kAbsent) {
      for (const auto& e : x) {
        if (v.is_object() && v.contains(e.get<std::string>())) return false;
      }
      return true;
    }
    if (k == "if") {
      if (valid(v, x, depth + 1)) return !s.contains("then") || valid(v, s["then"], depth + 1);
      return !s.contains("else") || valid(v, s["else"], depth + 1);
    }
    if (v.is_number()) return number_keyword(k, x, v, s);
    if (v.is_string()) return string_keyword(k, x, v);
    if (v.is_array()) return array_keyword(k, x, v, s, depth);
    if (v.is_object()) return object_keyword(k, x, v, s, depth);
    return supported(k);
  }

  static bool supported(const std::string& k) {
    static const std::set<std::string> unsupported{"unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
                                                   "$recursiveRef"};
    if (unsupported.count(k)) throw Error("unsupported keyword '" + k + "'");
    return true;
  }

  bool number_keyword(const std::string& k, const Json& x, const Json& v, const Json& s) {
    const double d = v.get<double>();
    auto flag = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    if (k == "minimum") return flag("exclusiveMinimum") ? d > num(x, k) : d >= num(x, k);
    if (k == "maximum") return flag("exclusiveMaximum") ? d < num(x, k) : d <= num(x, k);
    if (k == "exclusiveMinimum") return x.is_boolean() || d > num(x, k);
    if (k == "exclusiveMaximum") return x.is_boolean() || d < num(x, k);
    if (k == "multipleOf") {
      if (!is_integer_value(v) || !is_integer_value(x) || std::fabs(d) > 9e15 || num(x, k) <= 0) {
        throw Error("unsupported keyword 'multipleOf' (only integers are checked exactly)");
      }
      return static_cast<int64_t>(d) % static_cast<int64_t>(num(x, k)) == 0;
    }
    return supported(k);
  }

  bool string_keyword(const std::string& k, const Json& x, const Json& v) {
    const std::string& text = v.get_ref<const std::string&>();
    if (k == "minLength") return static_cast<double>(utf8_length(text)) >= num(x, k);
    if (k == "maxLength") return static_cast<double>(utf8_length(text)) <= num(x, k);
    if (k == "pattern") return pattern_matches(x.get<std::string>(), text);
    if (k == "format" && x.is_string()) {
      const char* re = format_regex(x.get<std::string>());
      return !re || pattern_matches(std::string("^(") + re + ")$", text);
    }
    return supported(k);
  }

  bool array_keyword(const std::string& k, const Json& x, const Json& v, const Json& s, int depth) {
    size_t prefix = 0;
    if (s.contains("prefixItems")) prefix = s["prefixItems"].size();
    if (k == "minItems") return static_cast<double>(v.size()) >= num(x, k);
    if (k == "maxItems") return static_cast<double>(v.size()) <= num(x, k);
    if (k == "prefixItems") {
      for (size_t i = 0; i < v.size() && i < x.size(); ++i) {
        if (!valid(v[i], x[i], depth + 1)) return false;
      }
      return true;
    }
    if (k == "items") {
      if (x.is_array()) {  // draft 4 tuple
        for (size_t i = 0; i < v.size(); ++i) {
          const Json& sub = i < x.size()                    ? x[i]
                            : s.contains("additionalItems") ? s["additionalItems"]
                                                            : Json(true);
          if (!valid(v[i], sub, depth + 1)) return false;
        }
        return true;
      }
      for (size_t i = prefix; i < v.size(); ++i) {
        if (!valid(v[i], x, depth + 1)) return false;
      }
      return true;
    }
    if (k == "uniqueItems") {
      if (!x.is_boolean() || !x.get<bool>()) return true;
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = i + 1; j < v.size(); ++j) {
          if (json_equal(v[i], v[j])) return false;
        }
      }
      return true;
    }
    if (k == "contains") {
      size_t n = 0;
      for (const auto& e : v) n += valid(e, x, depth + 1);
      const double lo = s.contains("minContains") ? num(s["minContains"], "minContains") : 1;
      const double hi = s.contains("maxContains") ? num(s["maxContains"], "maxContains") : 1e18;
      return static_cast<double>(n) >= lo && static_cast<double>(n) <= hi;
    }
    return supported(k);
  }

  bool object_keyword(const std::string& k, const Json& x, const Json& v, const Json& s, int depth) {
    if (k == "required") {
      for (const auto& r : x) {
        if (!v.contains(r.get<std::string>())) return false;
      }
      return true;
    }
    if (k == "minProperties") return static_cast<double>(v.size()) >= num(x, k);
    if (k == "maxProperties") return static_cast<double>(v.size()) <= num(x, k);
    if (k == "properties") {
      for (auto& [name, sub] : x.items()) {
        if (v.contains(name) && !valid(v[name], sub, depth + 1)) return false;
      }
      return true;
    }
    if (k == "patternProperties") {
      for (auto& [pattern, sub] : x.items()) {
        for (auto& [name, val] : v.items()) {
          if (pattern_matches(pattern, name) && !valid(val, sub, depth + 1)) return false;
        }
      }
      return true;
    }
    if (k == "additionalProperties") {
      for (auto& [name, val] : v.items()) {
        if (s.contains("properties") && s["properties"].contains(name)) continue;
        bool patterned = false;
        if (s.contains("patternProperties")) {
          for (auto& [pattern, sub] : s["patternProperties"].items()) {
            patterned = patterned || pattern_matches(pattern, name);
          }
        }
        if (!patterned && !valid(val, x, depth + 1)) return false;
      }
      return true;
    }
    if (k == "propertyNames") {
      for (auto& [name, val] : v.items()) {
        if (!valid(Json(name), x, depth + 1)) return false;
      }
      return true;
    }
    if (k == "dependentRequired" || k == "dependentSchemas" || k == "dependencies") {
      for (auto& [name, dep] : x.items()) {
        if (!v.contains(name)) continue;
        if (dep.is_array()) {
          for (const auto& r : dep) {
            if (!v.contains(r.get<std::string>())) return false;
          }
        } else if (!valid(v, dep, depth + 1)) {
          return false;
        }
      }
      return true;
    }
    return supported(k);
  }

  const Json& root_;
};

}  // namespace

// Days per month, February 29th only in leap years.
#define DATE                                                                                                \
  "(([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-" \
  "9]|2[0-8]))|"                                                                                            \
  "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29))"

const char* format_regex(const std::string& format) {
  static const std::map<std::string, const char*> k{
      {"date", DATE},
      {"time",
       "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      {"date-time", DATE "[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?"
                         "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      {"email",
       "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/"
       "=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
       "(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"uri", "[A-Za-z][A-Za-z0-9+.\\-]*:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=%]*"},
      {"ipv4",
       "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
      {"ipv6",
       "(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-"
       "F]{1,4}|"
       "([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|"
       "([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|"
       "[0-9a-fA-F]{1,4}:(:[0-9a-fA-F]{1,4}){1,6}|:((:[0-9a-fA-F]{1,4}){1,7}|:))"},
      {"hostname",
       "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"},
  };
  auto it = k.find(format);
  return it == k.end() ? nullptr : it->second;
}

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    if (a.size() <= 16) {
      for (auto& [k, x] : a.items()) {
        if (!b.contains(k) || !json_equal(x, b[k])) return false;
      }
      return true;
    }
    // An ordered object finds a key by a scan: a const of 60 000 keys compared with itself took 8 s.
    std::unordered_map<std::string_view, const Json*> in_b;
    in_b.reserve(b.size());
    for (auto& [k, x] : b.items()) in_b.emplace(k, &x);
    for (auto& [k, x] : a.items()) {
      const auto it = in_b.find(k);
      if (it == in_b.end() || !json_equal(x, *it->second)) return false;
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

const Json& resolve_ref(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') throw Error("$ref '" + ref + "' is not inside this document");
  const std::string pointer = ref.substr(1);
  std::string decoded;  // percent-decoding of the fragment
  for (size_t i = 0; i < pointer.size(); ++i) {
    if (pointer[i] == '%' && i + 2 < pointer.size() &&
        std::isxdigit(static_cast<unsigned char>(pointer[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(pointer[i + 2]))) {
      decoded.push_back(static_cast<char>(std::stoi(pointer.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      decoded.push_back(pointer[i]);
    }
  }
  if (!decoded.empty() && decoded[0] != '/') throw Error("$ref '" + ref + "': anchors are not supported");
  try {
    return root.at(Json::json_pointer(decoded));
  } catch (const std::exception&) {
    throw Error("$ref '" + ref + "' does not resolve");
  }
}

bool pattern_matches(const std::string& pattern, const std::string& text) {
  GrammarBuilder b;
  const int rule = b.new_rule("pattern");
  b.define(rule, compile_regex(b, pattern, {false, true}));
  return grammar_matches(compile_grammar(b, rule), text);
}

bool json_valid(const Json& value, const Json& schema, const Json& root) {
  return Validator(root).valid(value, schema, 0);
}

}  // namespace spark::grammar
