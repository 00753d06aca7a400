#include "grammar/json_schema.h"

#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "grammar/regex.h"
#include "spark/error.h"

namespace spark::grammar {

namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate (or that no validator of the drafts enforces) are ignored; these change which
// instances are valid and are refused when the grammar cannot enforce them.
const std::set<std::string>& unsupported_keywords() {
  static const std::set<std::string> k{"not",
                                       "if",
                                       "then",
                                       "else",
                                       "dependencies",
                                       "dependentSchemas",
                                       "dependentRequired",
                                       "propertyNames",
                                       "minProperties",
                                       "maxProperties",
                                       "multipleOf",
                                       "contains",
                                       "minContains",
                                       "maxContains",
                                       "unevaluatedProperties",
                                       "unevaluatedItems",
                                       "patternProperties",
                                       "$dynamicRef",
                                       "$recursiveRef"};
  return k;
}

const std::set<std::string>& assertion_keywords() {
  static const std::set<std::string> k{"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "prefixItems",
                                       "additionalItems",
                                       "minItems",
                                       "maxItems",
                                       "uniqueItems",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "oneOf",
                                       "allOf",
                                       "$ref",
                                       "minLength",
                                       "maxLength",
                                       "pattern",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum"};
  return k;
}

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

// Digit strings without leading zeros for the integers in [lo, hi] (hi empty: unbounded).
class IntRanges {
 public:
  explicit IntRanges(GrammarBuilder& b) : b_(b) {}

  ExprId nonneg(uint64_t lo, std::optional<uint64_t> hi) {
    if (hi && *hi < lo) return b_.nothing();
    std::vector<ExprId> options;
    const std::string los = std::to_string(lo);
    const size_t lo_len = los.size();
    const size_t hi_len = hi ? std::to_string(*hi).size() : lo_len;
    for (size_t len = lo_len; len <= hi_len; ++len) {
      const std::string a = len == lo_len ? los : "1" + std::string(len - 1, '0');
      const std::string z = hi && len == hi_len ? std::to_string(*hi) : std::string(len, '9');
      options.push_back(same_length(a, z));
    }
    // Unbounded: every length beyond the lower bound's.
    if (!hi) {
      options.push_back(
          b_.seq({b_.bytes({{'1', '9'}}), b_.repeat(digit(), static_cast<int>(lo_len), kUnbounded)}));
    }
    return b_.alt(std::move(options));
  }

  // Signed integers in [lo, hi]; -0 is not produced.
  ExprId range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<ExprId> options;
    // Non-negative part.
    if (!hi || *hi >= 0) {
      const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
      options.push_back(nonneg(a, hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt));
    }
    // Negative part: -m with m in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
      const uint64_t m_lo = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
      std::optional<uint64_t> m_hi;
      if (lo) m_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
      options.push_back(b_.seq({b_.byte('-'), nonneg(m_lo, m_hi)}));
    }
    return b_.alt(std::move(options));
  }

  ExprId digit() { return b_.bytes({{'0', '9'}}); }

 private:
  // Equal-length digit strings a <= z.
  ExprId same_length(const std::string& a, const std::string& z) {
    if (a.empty()) return b_.empty();
    if (a.size() == 1) return b_.bytes({{static_cast<uint8_t>(a[0]), static_cast<uint8_t>(z[0])}});
    if (a[0] == z[0])
      return b_.seq({b_.byte(static_cast<uint8_t>(a[0])), same_length(a.substr(1), z.substr(1))});
    const size_t rest = a.size() - 1;
    std::vector<ExprId> options;
    options.push_back(
        b_.seq({b_.byte(static_cast<uint8_t>(a[0])), same_length(a.substr(1), std::string(rest, '9'))}));
    if (a[0] + 1 <= z[0] - 1) {
      options.push_back(b_.seq({b_.bytes({{static_cast<uint8_t>(a[0] + 1), static_cast<uint8_t>(z[0] - 1)}}),
                                b_.repeat(digit(), static_cast<int>(rest), static_cast<int>(rest))}));
    }
    options.push_back(
        b_.seq({b_.byte(static_cast<uint8_t>(z[0])), same_length(std::string(rest, '0'), z.substr(1))}));
    return b_.alt(std::move(options));
  }

  GrammarBuilder& b_;
};

struct Bound {
  int64_t value;
  bool exclusive;
};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {
    ws_ = b_.repeat(b_.bytes({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}), 0,
                    options.max_whitespace);
  }

  Grammar compile() {
    const int top = b_.new_rule("root");
    b_.define(top, value(root_, "#"));
    return compile_grammar(b_, top);
  }

  Grammar compile_any_object() {
    const int top = b_.new_rule("root");
    b_.define(top, object_of(Json::object(), "#"));
    return compile_grammar(b_, top);
  }

  GrammarBuilder& builder() { return b_; }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw Error("JSON Schema at " + path + ": " + what);
  }

  ExprId sep() { return b_.seq({ws_, b_.byte(','), ws_}); }
  ExprId colon() { return b_.seq({ws_, b_.byte(':'), ws_}); }

  // The expression for an instance of `s`. Object- and array-valued schemas become rules (their
  // expressions are shared and may recurse).
  ExprId value(const Json& s, const std::string& path) {
    auto it = rule_of_.find(&s);
    if (it != rule_of_.end()) return b_.call(it->second);
    const int rule = b_.new_rule(path);
    rule_of_[&s] = rule;
    b_.define(rule, build(s, path, 0));
    return b_.call(rule);
  }

  const Json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') fail(path, "$ref '" + ref + "' is not inside this document");
    std::string pointer = ref.substr(1);
    // Percent-decoding of the fragment.
    std::string decoded;
    for (size_t i = 0; i < pointer.size(); ++i) {
      if (pointer[i] == '%' && i + 2 < pointer.size() + 0 &&
          std::isxdigit(static_cast<unsigned char>(pointer[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(pointer[i + 2]))) {
        decoded.push_back(static_cast<char>(std::stoi(pointer.substr(i + 1, 2), nullptr, 16)));
        i += 2;
      } else {
        decoded.push_back(pointer[i]);
      }
    }
    if (!decoded.empty() && decoded[0] != '/') fail(path, "$ref '" + ref + "': anchors are not supported");
    try {
      return root_.at(Json::json_pointer(decoded));
    } catch (const std::exception&) {
      fail(path, "$ref '" + ref + "' does not resolve");
    }
  }

  static bool has_assertions(const Json& s, const char* except) {
    for (auto& [k, v] : s.items()) {
      if (k != except && assertion_keywords().count(k)) return true;
    }
    return false;
  }

  void check_keywords(const Json& s, const std::string& path) {
    for (auto& [k, v] : s.items()) {
      if (unsupported_keywords().count(k)) fail(path, "unsupported keyword '" + k + "'");
      if (k == "uniqueItems" && v.is_boolean() && v.get<bool>())
        fail(path, "unsupported keyword 'uniqueItems'");
    }
  }

  // Merges allOf members (and a $ref with sibling keywords) into one schema, keyword by keyword.
  Json merge(const Json& a, const Json& b, const std::string& path, int depth) {
    if (depth > 32) fail(path, "allOf nested too deeply to merge");
    Json out = a;
    for (auto& [k, v] : b.items()) {
      if (!out.contains(k)) {
        out[k] = v;
        continue;
      }
      Json& mine = out[k];
      if (mine == v) continue;
      if (k == "required") {
        for (const auto& r : v) {
          if (std::find(mine.begin(), mine.end(), r) == mine.end()) mine.push_back(r);
        }
      } else if (k == "properties") {
        for (auto& [name, sub] : v.items()) {
          if (!mine.contains(name)) {
            mine[name] = sub;
          } else {
            mine[name] =
                merge(flatten(mine[name], path, depth + 1), flatten(sub, path, depth + 1), path, depth + 1);
          }
        }
      } else if (k == "type") {
        auto as_list = [](const Json& t) { return t.is_array() ? t : Json::array({t}); };
        Json both = Json::array();
        for (const auto& t : as_list(mine)) {
          for (const auto& u : as_list(v)) {
            if (t == u || (t == "number" && u == "integer"))
              both.push_back(u);
            else if (t == "integer" && u == "number")
              both.push_back(t);
          }
        }
        if (both.empty()) fail(path, "allOf: no type satisfies every member");
        mine = both.size() == 1 ? both[0] : both;
      } else if (k == "description" || k == "title" || k == "default" || k == "examples" || k == "$comment") {
        continue;
      } else if (k == "items" && mine.is_object() && v.is_object()) {
        mine = merge(flatten(mine, path, depth + 1), flatten(v, path, depth + 1), path, depth + 1);
      } else if (k == "additionalProperties" && mine.is_boolean() && v.is_boolean()) {
        mine = mine.get<bool>() && v.get<bool>();
      } else if ((k == "minimum" || k == "minLength" || k == "minItems") && mine.is_number() &&
                 v.is_number()) {
        if (v > mine) mine = v;
      } else if ((k == "maximum" || k == "maxLength" || k == "maxItems") && mine.is_number() &&
                 v.is_number()) {
        if (v < mine) mine = v;
      } else if (k == "enum" && mine.is_array() && v.is_array()) {
        Json both = Json::array();
        for (const auto& x : mine) {
          if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
        }
        mine = both;
      } else {
        fail(path, "allOf: cannot merge differing '" + k + "'");
      }
    }
    return out;
  }

  // A schema with its $ref (when it has siblings) and allOf folded in.
  Json flatten(const Json& s, const std::string& path, int depth) {
    if (depth > 32) fail(path, "$ref / allOf nested too deeply to merge");
    if (s.is_boolean()) {
      if (s.get<bool>()) return Json::object();
      fail(path, "allOf member 'false'");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    Json out = s;
    if (out.contains("$ref")) {
      const Json& target = resolve(out["$ref"].get<std::string>(), path);
      out.erase("$ref");
      out = merge(flatten(target, path, depth + 1), out, path, depth);
    }
    if (out.contains("allOf")) {
      Json members = out["allOf"];
      out.erase("allOf");
      if (!members.is_array()) fail(path, "allOf must be an array");
      for (const auto& m : members) out = merge(out, flatten(m, path, depth + 1), path, depth);
    }
    return out;
  }

  ExprId build(const Json& s, const std::string& path, int depth) {
    if (depth > 64) fail(path, "schema nested too deeply");
    if (s.is_boolean()) return s.get<bool>() ? any_value() : b_.nothing();
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path, "$ref must be a string");
      if (!has_assertions(s, "$ref")) {
        return value(resolve(s["$ref"].get<std::string>(), path), s["$ref"].get<std::string>());
      }
      return build(keep(flatten(s, path, depth)), path, depth + 1);
    }
    if (s.contains("allOf")) return build(keep(flatten(s, path, depth)), path, depth + 1);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const Json& options = s[key];
      if (!options.is_array() || options.empty()) fail(path, std::string(key) + " must be a non-empty array");
      Json base = s;
      base.erase(key);
      const bool plain = !has_assertions(base, "");
      std::vector<ExprId> alts;
      for (size_t i = 0; i < options.size(); ++i) {
        const std::string p = path + "/" + key + "/" + std::to_string(i);
        if (plain) {
          alts.push_back(value(options[i], p));
        } else {
          alts.push_back(build(keep(merge(base, flatten(options[i], p, depth), p, depth)), p, depth + 1));
        }
      }
      return b_.alt(std::move(alts));
    }
    if (s.contains("const")) return const_value(s["const"]);
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string())
        types.push_back(t.get<std::string>());
      else if (t.is_array()) {
        for (const auto& x : t) {
          if (!x.is_string()) fail(path, "type list members must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(path, "type must be a string or a list");
      }
    } else {
      types = {"object", "array", "string", "number", "boolean", "null"};
    }
    if (std::find(types.begin(), types.end(), "number") != types.end()) {
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
    }
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array()) fail(path, "enum must be an array");
      std::vector<ExprId> alts;
      for (const auto& v : e) {
        if (type_matches(v, types)) alts.push_back(const_value(v));
      }
      return b_.alt(std::move(alts));
    }
    std::vector<ExprId> alts;
    for (const std::string& t : types) {
      if (t == "null")
        alts.push_back(b_.literal("null"));
      else if (t == "boolean")
        alts.push_back(b_.alt({b_.literal("true"), b_.literal("false")}));
      else if (t == "integer")
        alts.push_back(integer(s, path));
      else if (t == "number")
        alts.push_back(number(s, path));
      else if (t == "string")
        alts.push_back(string(s, path));
      else if (t == "array")
        alts.push_back(array(s, path));
      else if (t == "object")
        alts.push_back(object_of(s, path));
      else
        fail(path, "unknown type '" + t + "'");
    }
    return b_.alt(std::move(alts));
  }

  const Json& keep(Json j) {
    kept_.push_back(std::move(j));
    return kept_.back();
  }

  static bool type_matches(const Json& v, const std::vector<std::string>& types) {
    for (const auto& t : types) {
      if ((t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) ||
          (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
          (t == "array" && v.is_array()) || (t == "object" && v.is_object())) {
        return true;
      }
      if (t == "integer" && (v.is_number_integer() ||
                             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))) {
        return true;
      }
    }
    return false;
  }

  // A JSON string literal for `text`: raw UTF-8 or \u escapes for the non-ASCII characters.
  ExprId string_literal(const std::string& text) {
    std::vector<ExprId> parts{b_.byte('"')};
    size_t i = 0;
    while (i < text.size()) {
      const auto c0 = static_cast<unsigned char>(text[i]);
      const size_t len = c0 < 0x80 ? 1 : c0 < 0xE0 ? 2 : c0 < 0xF0 ? 3 : 4;
      uint32_t cp = len == 1 ? c0 : len == 2 ? (c0 & 0x1F) : len == 3 ? (c0 & 0x0F) : (c0 & 0x07);
      for (size_t k = 1; k < len && i + k < text.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
      if (cp >= 0x20 && cp < 0x7F) {
        parts.push_back(codepoint_set(b_, {{cp, cp}}, true));
      } else if (cp < 0x80) {
        parts.push_back(codepoint_set(b_, {{cp, cp}}, true));
      } else {
        std::vector<ExprId> forms{b_.literal(text.substr(i, len))};
        auto hex = [](uint32_t v, bool upper) {
          const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
          std::string s = "\\u";
          for (int shift = 12; shift >= 0; shift -= 4) s.push_back(d[(v >> shift) & 0xF]);
          return s;
        };
        for (bool upper : {false, true}) {
          if (cp < 0x10000) {
            forms.push_back(b_.literal(hex(cp, upper)));
          } else {
            const uint32_t v = cp - 0x10000;
            forms.push_back(b_.literal(hex(0xD800 + (v >> 10), upper) + hex(0xDC00 + (v & 0x3FF), upper)));
          }
        }
        parts.push_back(b_.alt(std::move(forms)));
      }
      i += len;
    }
    parts.push_back(b_.byte('"'));
    return b_.seq(std::move(parts));
  }

  ExprId const_value(const Json& v) {
    if (v.is_string()) return string_literal(v.get<std::string>());
    if (v.is_object()) {
      std::vector<ExprId> members;
      for (auto& [k, x] : v.items()) members.push_back(b_.seq({string_literal(k), colon(), const_value(x)}));
      return list('{', '}', members);
    }
    if (v.is_array()) {
      std::vector<ExprId> members;
      for (const auto& x : v) members.push_back(const_value(x));
      return list('[', ']', members);
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::floor(d) == d && std::fabs(d) < 1e15) {
        const std::string i = std::to_string(static_cast<int64_t>(d));
        return b_.alt({b_.literal(i), b_.literal(i + ".0")});
      }
    }
    return b_.literal(v.dump());
  }

  ExprId list(char open, char close, const std::vector<ExprId>& members) {
    if (members.empty())
      return b_.seq({b_.byte(static_cast<uint8_t>(open)), ws_, b_.byte(static_cast<uint8_t>(close))});
    std::vector<ExprId> parts{b_.byte(static_cast<uint8_t>(open)), ws_};
    for (size_t i = 0; i < members.size(); ++i) {
      if (i) parts.push_back(sep());
      parts.push_back(members[i]);
    }
    parts.push_back(ws_);
    parts.push_back(b_.byte(static_cast<uint8_t>(close)));
    return b_.seq(std::move(parts));
  }

  ExprId any_value() {
    if (any_rule_ >= 0) return b_.call(any_rule_);
    any_rule_ = b_.new_rule("any");
    const int obj = b_.new_rule("any-object");
    const int arr = b_.new_rule("any-array");
    ExprId member = b_.seq({plain_string(), colon(), b_.call(any_rule_)});
    b_.define(obj,
              b_.seq({b_.byte('{'), ws_,
                      b_.optional(b_.seq({member, b_.repeat(b_.seq({sep(), member}), 0, kUnbounded), ws_})),
                      b_.byte('}')}));
    ExprId item = b_.call(any_rule_);
    b_.define(arr, b_.seq({b_.byte('['), ws_,
                           b_.optional(b_.seq({item, b_.repeat(b_.seq({sep(), item}), 0, kUnbounded), ws_})),
                           b_.byte(']')}));
    b_.define(any_rule_, b_.alt({b_.call(obj), b_.call(arr), plain_string(), plain_number(),
                                 b_.literal("true"), b_.literal("false"), b_.literal("null")}));
    return b_.call(any_rule_);
  }

  ExprId string_char() {
    if (string_char_ >= 0) return string_char_;
    // Raw characters but `"`, `\` and control characters, then escapes.
    ExprId raw =
        b_.alt({b_.bytes({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}}), b_.codepoints(0x80, 0x10FFFF)});
    ExprId hex = b_.bytes({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
    ExprId esc = b_.seq({b_.byte('\\'), b_.alt({b_.bytes({{'"', '"'},
                                                          {'\\', '\\'},
                                                          {'/', '/'},
                                                          {'b', 'b'},
                                                          {'f', 'f'},
                                                          {'n', 'n'},
                                                          {'r', 'r'},
                                                          {'t', 't'}}),
                                                b_.seq({b_.byte('u'), b_.repeat(hex, 4, 4)})})});
    string_char_ = b_.alt({raw, esc});
    return string_char_;
  }

  // One character, leniently UTF-8 (lead byte and continuation count only: a tokenizer's text is valid
  // UTF-8 anyway), with escapes: few states, for copying.
  ExprId counted_char() {
    if (counted_char_ >= 0) return counted_char_;
    ExprId cont = b_.bytes({{0x80, 0xBF}});
    ExprId hex = b_.bytes({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
    counted_char_ = b_.alt(
        {b_.bytes({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}}), b_.seq({b_.bytes({{0xC2, 0xDF}}), cont}),
         b_.seq({b_.bytes({{0xE0, 0xEF}}), cont, cont}), b_.seq({b_.bytes({{0xF0, 0xF4}}), cont, cont, cont}),
         b_.seq({b_.byte('\\'), b_.alt({b_.bytes({{'"', '"'},
                                                  {'\\', '\\'},
                                                  {'/', '/'},
                                                  {'b', 'b'},
                                                  {'f', 'f'},
                                                  {'n', 'n'},
                                                  {'r', 'r'},
                                                  {'t', 't'}}),
                                        b_.seq({b_.byte('u'), hex, hex, hex, hex})})})});
    return counted_char_;
  }

  int char_rule() {
    if (char_rule_ >= 0) return char_rule_;
    char_rule_ = b_.new_rule("char");
    b_.define(char_rule_, string_char());
    return char_rule_;
  }

  ExprId plain_string() {
    return b_.seq({b_.byte('"'), b_.repeat(string_char(), 0, kUnbounded), b_.byte('"')});
  }

  ExprId plain_number() {
    ExprId digits = b_.repeat(b_.bytes({{'0', '9'}}), 1, kUnbounded);
    ExprId int_part = b_.alt(
        {b_.byte('0'), b_.seq({b_.bytes({{'1', '9'}}), b_.repeat(b_.bytes({{'0', '9'}}), 0, kUnbounded)})});
    return b_.seq({b_.optional(b_.byte('-')), int_part, b_.optional(b_.seq({b_.byte('.'), digits})),
                   b_.optional(b_.seq({b_.bytes({{'e', 'e'}, {'E', 'E'}}),
                                       b_.optional(b_.bytes({{'+', '+'}, {'-', '-'}})), digits}))});
  }

  ExprId string(const Json& s, const std::string& path) {
    int min_len = 0, max_len = kUnbounded;
    if (s.contains("minLength")) min_len = count(s["minLength"], path, "minLength");
    if (s.contains("maxLength")) max_len = count(s["maxLength"], path, "maxLength");
    const bool has_length = min_len > 0 || max_len != kUnbounded;
    const char* format = nullptr;
    if (s.contains("format") && s["format"].is_string())
      format = format_regex(s["format"].get<std::string>());
    const bool has_pattern = s.contains("pattern");
    if ((has_pattern ? 1 : 0) + (format ? 1 : 0) + (has_length ? 1 : 0) > 1) {
      fail(path, has_pattern ? "pattern combined with format or minLength/maxLength is not supported"
                             : "format combined with minLength/maxLength is not supported");
    }
    if (has_pattern) {
      if (!s["pattern"].is_string()) fail(path, "pattern must be a string");
      try {
        return b_.seq(
            {b_.byte('"'), compile_regex(b_, s["pattern"].get<std::string>(), {true, true}), b_.byte('"')});
      } catch (const Error& e) {
        fail(path, e.what());
      }
    }
    if (format) return b_.seq({b_.byte('"'), compile_regex(b_, format, {true, false}), b_.byte('"')});
    if (max_len != kUnbounded && max_len > 100000) fail(path, "maxLength above 100000 is not supported");
    if (min_len > 100000) fail(path, "minLength above 100000 is not supported");
    if (!has_length) return b_.seq({b_.byte('"'), b_.repeat(string_char(), 0, kUnbounded), b_.byte('"')});
    // Counted characters: a compact character automaton copied per count, or for long bounds one call per
    // character (fewer states; masks then need the stack at every character).
    const int copies = max_len == kUnbounded ? min_len + 1 : max_len;
    ExprId ch = copies > 64 ? b_.call(char_rule()) : counted_char();
    return b_.seq({b_.byte('"'), b_.repeat(ch, min_len, max_len), b_.byte('"')});
  }

  static int count(const Json& v, const std::string& path, const char* key) {
    if (!v.is_number() || v.get<double>() < 0)
      fail(path, std::string(key) + " must be a non-negative number");
    return static_cast<int>(std::min(v.get<double>(), 1e9));
  }

  // Lower and upper bounds rounded to integers for an integer instance (exclusive folded in).
  void int_bounds(const Json& s, const std::string& path, std::optional<int64_t>& lo,
                  std::optional<int64_t>& hi) {
    auto num = [&](const char* key) -> std::optional<double> {
      if (!s.contains(key) || s[key].is_boolean()) return std::nullopt;
      if (!s[key].is_number()) fail(path, std::string(key) + " must be a number");
      const double d = s[key].get<double>();
      if (std::fabs(d) > 9e15) fail(path, std::string(key) + " beyond 9e15 is not supported");
      return d;
    };
    auto flag = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    if (auto m = num("minimum")) {
      const double c = std::ceil(*m);
      lo = static_cast<int64_t>(flag("exclusiveMinimum") && c == *m ? c + 1 : c);
    }
    if (auto m = num("exclusiveMinimum")) {
      const double f = std::floor(*m) + 1;
      lo = lo ? std::max(*lo, static_cast<int64_t>(f)) : static_cast<int64_t>(f);
    }
    if (auto m = num("maximum")) {
      const double f = std::floor(*m);
      hi = static_cast<int64_t>(flag("exclusiveMaximum") && f == *m ? f - 1 : f);
    }
    if (auto m = num("exclusiveMaximum")) {
      const double c = std::ceil(*m) - 1;
      hi = hi ? std::min(*hi, static_cast<int64_t>(c)) : static_cast<int64_t>(c);
    }
  }

  ExprId integer(const Json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    int_bounds(s, path, lo, hi);
    if (lo && hi && *lo > *hi) return b_.nothing();
    return IntRanges(b_).range(lo, hi);
  }

  ExprId number(const Json& s, const std::string& path) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                         s.contains("exclusiveMaximum");
    if (!bounded) return plain_number();
    // Integer-valued bounds only; numbers then have no exponent.
    auto get = [&](const char* key) -> std::optional<Bound> {
      if (!s.contains(key) || s[key].is_boolean()) return std::nullopt;
      if (!s[key].is_number()) fail(path, std::string(key) + " must be a number");
      const double d = s[key].get<double>();
      if (std::floor(d) != d || std::fabs(d) > 9e15)
        fail(path, std::string(key) + " on a number must be an integer");
      return Bound{static_cast<int64_t>(d), false};
    };
    auto flag = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    std::optional<Bound> lo = get("minimum"), hi = get("maximum");
    if (lo && flag("exclusiveMinimum")) lo->exclusive = true;
    if (hi && flag("exclusiveMaximum")) hi->exclusive = true;
    if (auto x = get("exclusiveMinimum")) {
      if (!lo || x->value >= lo->value) lo = Bound{x->value, true};
    }
    if (auto x = get("exclusiveMaximum")) {
      if (!hi || x->value <= hi->value) hi = Bound{x->value, true};
    }
    std::vector<ExprId> options;
    // x >= 0 as its magnitude m with the same bounds (a negative lower bound is no bound).
    std::optional<Bound> m_lo = lo && lo->value >= 0 ? lo : std::nullopt;
    if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) options.push_back(magnitude(m_lo, hi));
    // x < 0 as -m with m > 0: m's lower bound from the upper bound, its upper bound from the lower bound.
    if (!lo || lo->value < 0) {
      std::optional<Bound> n_lo = Bound{0, true};
      if (hi && -hi->value > 0) n_lo = Bound{-hi->value, hi->exclusive};
      std::optional<Bound> n_hi;
      if (lo) n_hi = Bound{-lo->value, lo->exclusive};
      options.push_back(b_.seq({b_.byte('-'), magnitude(n_lo, n_hi)}));
    }
    return b_.alt(std::move(options));
  }

  // Non-negative decimals I(.F)? within integer bounds.
  ExprId magnitude(std::optional<Bound> lo, std::optional<Bound> hi) {
    IntRanges ir(b_);
    ExprId digits = b_.repeat(ir.digit(), 1, kUnbounded);
    ExprId frac_any = b_.optional(b_.seq({b_.byte('.'), digits}));
    ExprId frac_zero = b_.optional(b_.seq({b_.byte('.'), b_.repeat(b_.byte('0'), 1, kUnbounded)}));
    ExprId frac_nonzero = b_.seq({b_.byte('.'), b_.repeat(ir.digit(), 0, kUnbounded), b_.bytes({{'1', '9'}}),
                                  b_.repeat(ir.digit(), 0, kUnbounded)});
    enum Frac { kNone, kZero, kNonzero, kAny };
    auto meet = [](Frac a, Frac b) {
      if (a == kAny) return b;
      if (b == kAny) return a;
      return a == b ? a : kNone;
    };
    auto frac_for = [&](int64_t i) {
      Frac f = kAny;
      if (lo) f = meet(f, i > lo->value ? kAny : i == lo->value ? (lo->exclusive ? kNonzero : kAny) : kNone);
      if (hi) f = meet(f, i < hi->value ? kAny : i == hi->value ? (hi->exclusive ? kNone : kZero) : kNone);
      return f;
    };
    auto with = [&](ExprId ip, Frac f) {
      switch (f) {
        case kAny:
          return b_.seq({ip, frac_any});
        case kZero:
          return b_.seq({ip, frac_zero});
        case kNonzero:
          return b_.seq({ip, frac_nonzero});
        case kNone:
          break;
      }
      return b_.nothing();
    };
    std::vector<ExprId> options;
    const uint64_t a = lo ? static_cast<uint64_t>(lo->value) : 0;
    std::set<int64_t> special;
    if (lo) special.insert(lo->value);
    if (hi && hi->value >= 0) special.insert(hi->value);
    for (int64_t v : special) {
      if (v >= 0)
        options.push_back(with(ir.nonneg(static_cast<uint64_t>(v), static_cast<uint64_t>(v)), frac_for(v)));
    }
    // The integers strictly between the bounds take any fraction.
    const uint64_t from = lo ? a + 1 : 0;
    if (!hi) {
      options.push_back(with(ir.nonneg(from, std::nullopt), kAny));
    } else if (hi->value >= 1 && from <= static_cast<uint64_t>(hi->value - 1)) {
      options.push_back(with(ir.nonneg(from, static_cast<uint64_t>(hi->value - 1)), kAny));
    }
    return b_.alt(std::move(options));
  }

  ExprId array(const Json& s, const std::string& path) {
    std::vector<const Json*> prefix;
    const Json* rest = nullptr;
    bool rest_allowed = true;
    static const Json kTrue = true;
    const Json* items = s.contains("items") ? &s["items"] : nullptr;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(path, "prefixItems must be an array");
      for (const auto& x : s["prefixItems"]) prefix.push_back(&x);
      if (items) rest = items;
    } else if (items && items->is_array()) {
      for (const auto& x : *items) prefix.push_back(&x);
      if (s.contains("additionalItems")) rest = &s["additionalItems"];
    } else if (items) {
      rest = items;
    }
    if (!rest) rest = &kTrue;
    if (rest->is_boolean() && !rest->get<bool>()) rest_allowed = false;
    int lo = 0;
    int64_t hi = -1;
    if (s.contains("minItems")) lo = count(s["minItems"], path, "minItems");
    if (s.contains("maxItems")) hi = count(s["maxItems"], path, "maxItems");
    if (!rest_allowed)
      hi = hi < 0 ? static_cast<int64_t>(prefix.size())
                  : std::min<int64_t>(hi, static_cast<int64_t>(prefix.size()));
    if (hi >= 0 && lo > hi) return b_.nothing();
    if (lo > 10000 || hi > 10000) fail(path, "minItems/maxItems above 10000 are not supported");
    auto element = [&](size_t i) {
      const std::string p = path + "/items/" + std::to_string(i);
      return i < prefix.size() ? value(*prefix[i], p) : value(*rest, path + "/items");
    };
    // tail(i): elements from position i on, each after a separator.
    std::function<ExprId(size_t)> tail = [&](size_t i) -> ExprId {
      if (hi >= 0 && static_cast<int64_t>(i) >= hi) return b_.empty();
      if (i >= prefix.size()) {
        if (!rest_allowed) return b_.empty();
        const int min = std::max(0, lo - static_cast<int>(i));
        const int max = hi < 0 ? kUnbounded : static_cast<int>(hi - static_cast<int64_t>(i));
        return b_.repeat(b_.seq({sep(), element(i)}), min, max);
      }
      ExprId one = b_.seq({sep(), element(i), tail(i + 1)});
      return static_cast<int>(i) < lo ? one : b_.optional(one);
    };
    ExprId elements = b_.empty();
    if (hi != 0 && (prefix.size() > 0 || rest_allowed)) elements = b_.seq({element(0), tail(1), ws_});
    if (lo == 0) elements = b_.optional(elements);
    return b_.seq({b_.byte('['), ws_, elements, b_.byte(']')});
  }

  // Any JSON string except the given ones (additional property names); keys containing escapes are left out
  // so that no spelling of a declared name can pass.
  ExprId string_except(const std::vector<std::string>& names) {
    // Shared rules: the rest of a key once it left the trie, and a non-ASCII character followed by that.
    if (key_rest_rule_ < 0) {
      key_rest_rule_ = b_.new_rule("key-rest");
      ExprId raw =
          b_.alt({b_.bytes({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}}), b_.codepoints(0x80, 0x10FFFF)});
      b_.define(key_rest_rule_, b_.seq({b_.repeat(raw, 0, kUnbounded), b_.byte('"')}));
      key_nonascii_rule_ = b_.new_rule("key-nonascii-rest");
      b_.define(key_nonascii_rule_, b_.seq({b_.codepoints(0x80, 0x10FFFF), b_.call(key_rest_rule_)}));
    }
    ExprId any_rest = b_.call(key_rest_rule_);
    // Trie over the names' bytes.
    std::function<ExprId(const std::vector<std::string>&, size_t)> node =
        [&](const std::vector<std::string>& group, size_t depth) -> ExprId {
      std::vector<ExprId> options;
      bool is_name = false;
      std::map<uint8_t, std::vector<std::string>> by_byte;
      for (const auto& n : group) {
        if (n.size() == depth)
          is_name = true;
        else
          by_byte[static_cast<uint8_t>(n[depth])].push_back(n);
      }
      if (!is_name) options.push_back(b_.byte('"'));
      bool mid_character = false;
      for (auto& [byte, _] : by_byte) mid_character = mid_character || (byte >= 0x80 && byte < 0xC0);
      if (mid_character) {  // inside a name's multi-byte character: only the names go on
        options.clear();
        for (auto& [byte, sub] : by_byte) options.push_back(b_.seq({b_.byte(byte), node(sub, depth + 1)}));
        return b_.alt(std::move(options));
      }
      // A character that leaves the trie: one whose first byte is no child's.
      std::vector<ExprId> leave;
      std::vector<ByteRange> ascii;
      for (uint32_t c = 0x20; c < 0x80; ++c) {
        if (c != '"' && c != '\\' && !by_byte.count(static_cast<uint8_t>(c))) {
          ascii.push_back({static_cast<uint8_t>(c), static_cast<uint8_t>(c)});
        }
      }
      leave.push_back(b_.seq({b_.bytes(std::move(ascii)), any_rest}));
      bool lead_in_trie = false;
      for (auto& [byte, _] : by_byte) lead_in_trie = lead_in_trie || byte >= 0x80;
      if (!lead_in_trie) {
        leave.push_back(b_.call(key_nonascii_rule_));
        options.push_back(b_.alt(std::move(leave)));
        for (auto& [byte, sub] : by_byte) options.push_back(b_.seq({b_.byte(byte), node(sub, depth + 1)}));
        return b_.alt(std::move(options));
      }
      auto first_cp = [](uint32_t lead) {
        return lead < 0xE0   ? std::max<uint32_t>((lead & 0x1F) << 6, 0x80)
               : lead < 0xF0 ? std::max<uint32_t>((lead & 0x0F) << 12, 0x800)
                             : std::max<uint32_t>((lead & 0x07) << 18, 0x10000);
      };
      auto last_cp = [](uint32_t lead) {
        return lead < 0xE0   ? (((lead & 0x1F) << 6) | 0x3F)
               : lead < 0xF0 ? (((lead & 0x0F) << 12) | 0xFFF)
                             : (((lead & 0x07) << 18) | 0x3FFFF);
      };
      for (uint32_t c = 0xC2; c <= 0xF4; ++c) {
        if (by_byte.count(static_cast<uint8_t>(c))) continue;
        uint32_t end = c;
        while (end < 0xF4 && !by_byte.count(static_cast<uint8_t>(end + 1))) ++end;
        leave.push_back(b_.seq({b_.codepoints(first_cp(c), last_cp(end)), any_rest}));
        c = end;
      }
      options.push_back(b_.alt(std::move(leave)));
      for (auto& [byte, sub] : by_byte) options.push_back(b_.seq({b_.byte(byte), node(sub, depth + 1)}));
      return b_.alt(std::move(options));
    };
    std::vector<std::string> all;
    for (const auto& n : names) {
      // Names as they appear between the quotes (JSON-escaped); a name needing escapes cannot be spelled raw.
      const std::string d = Json(n).dump();
      all.push_back(d.substr(1, d.size() - 2));
    }
    return b_.seq({b_.byte('"'), node(all, 0)});
  }

  ExprId object_of(const Json& s, const std::string& path) {
    std::vector<std::pair<std::string, const Json*>> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail(path, "properties must be an object");
      for (auto& [k, v] : s["properties"].items()) props.emplace_back(k, &v);
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "required must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(path, "required members must be strings");
        required.insert(r.get<std::string>());
      }
    }
    for (const auto& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found) {
        static const Json kTrue = true;
        props.emplace_back(r, &kTrue);  // required but undeclared: any value under that name
      }
    }
    const Json* additional = nullptr;
    static const Json kTrue = true;
    additional = s.contains("additionalProperties") ? &s["additionalProperties"] : &kTrue;
    const bool additional_allowed = !(additional->is_boolean() && !additional->get<bool>());
    ExprId add_kv = b_.nothing();
    if (additional_allowed) {
      std::vector<std::string> names;
      for (const auto& p : props) names.push_back(p.first);
      add_kv = b_.seq({string_except(names), colon(), value(*additional, path + "/additionalProperties")});
    }
    const size_t n = props.size();
    // first[i] / rest[i]: members from property i on, with none / some already written.
    std::vector<int> first(n + 1), rest(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      first[i] = b_.new_rule(path + "/members" + std::to_string(i));
      rest[i] = b_.new_rule(path + "/more" + std::to_string(i));
    }
    if (additional_allowed) {
      ExprId more = b_.repeat(b_.seq({sep(), add_kv}), 0, kUnbounded);
      b_.define(first[n], b_.optional(b_.seq({add_kv, more, ws_})));
      b_.define(rest[n], b_.seq({more, ws_}));
    } else {
      b_.define(first[n], b_.empty());
      b_.define(rest[n], ws_);
    }
    for (size_t i = n; i-- > 0;) {
      const std::string p = path + "/properties/" + props[i].first;
      ExprId kv = b_.seq({string_literal(props[i].first), colon(), value(*props[i].second, p)});
      const bool optional = !required.count(props[i].first);
      std::vector<ExprId> f{b_.seq({kv, b_.call(rest[i + 1])})};
      std::vector<ExprId> r{b_.seq({sep(), kv, b_.call(rest[i + 1])})};
      if (optional) {
        f.push_back(b_.call(first[i + 1]));
        r.push_back(b_.call(rest[i + 1]));
      }
      b_.define(first[i], b_.alt(std::move(f)));
      b_.define(rest[i], b_.alt(std::move(r)));
    }
    return b_.seq({b_.byte('{'), ws_, b_.call(first[0]), b_.byte('}')});
  }

  const Json& root_;
  JsonSchemaOptions options_;
  GrammarBuilder b_;
  ExprId ws_;
  ExprId string_char_ = -1;
  ExprId counted_char_ = -1;
  int char_rule_ = -1;
  int key_rest_rule_ = -1;
  int key_nonascii_rule_ = -1;
  int any_rule_ = -1;
  std::map<const Json*, int> rule_of_;
  std::deque<Json> kept_;
};

}  // namespace

Grammar compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    throw Error(std::string("JSON Schema is not valid JSON: ") + e.what());
  }
  return SchemaCompiler(schema, options).compile();
}

Grammar json_object_grammar(const JsonSchemaOptions& options) {
  static const Json kEmpty = Json::object();
  return SchemaCompiler(kEmpty, options).compile_any_object();
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
  GrammarBuilder b;
  std::vector<ExprId> options;
  for (const auto& c : choices) options.push_back(b.literal(c));
  const int root = b.new_rule("root");
  b.define(root, b.alt(std::move(options)));
  return compile_grammar(b, root);
}

Grammar regex_grammar(std::string_view pattern) {
  GrammarBuilder b;
  const int root = b.new_rule("root");
  b.define(root, compile_regex(b, pattern));
  return compile_grammar(b, root);
}

}  // namespace spark::grammar
