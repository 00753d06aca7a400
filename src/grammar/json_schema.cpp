#include "grammar/json_schema.h"

#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "grammar/json_validate.h"
#include "grammar/product.h"
#include "grammar/regex.h"
#include "spark/error.h"
#include "util/bounded_json.h"

namespace spark::grammar {

DfaTableCache& counted_string_tables() {
  // A request may name any length up to kMaxCountedDfa, and a table of 256 characters is ~0.5 MB: the
  // earlier bound of 4096 tables could keep 2 GB for the process's life.
  static DfaTableCache cache(std::numeric_limits<size_t>::max(), size_t{64} << 20);
  return cache;
}

namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate (or that no validator of the drafts enforces) are ignored; these change which
// instances are valid and are refused when the grammar cannot enforce them.
const std::set<std::string>& unsupported_keywords() {
  static const std::set<std::string> k{"if",
                                       "then",
                                       "else",
                                       "dependencies",
                                       "dependentSchemas",
                                       "dependentRequired",
                                       "multipleOf",
                                       "contains",
                                       "minContains",
                                       "maxContains",
                                       "unevaluatedProperties",
                                       "unevaluatedItems",
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
                                       "exclusiveMaximum",
                                       "not",
                                       "patternProperties",
                                       "propertyNames",
                                       "minProperties",
                                       "maxProperties",
                                       kExclude,
                                       kAbsent};
  return k;
}

// The largest integer written where a schema sets no bound: 16 digits.
constexpr int64_t kMaxUnboundedInteger = 9'999'999'999'999'999;
constexpr size_t kMaxPatternProperties = 128;

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
  ExprId range(int64_t lo, int64_t hi) {
    if (lo > hi) return b_.nothing();
    std::vector<ExprId> options;
    // Non-negative part.
    if (hi >= 0) options.push_back(nonneg(lo > 0 ? static_cast<uint64_t>(lo) : 0, static_cast<uint64_t>(hi)));
    // Negative part: -m with m in [max(1, -hi), -lo].
    if (lo < 0) {
      const uint64_t m_lo = hi < 0 ? static_cast<uint64_t>(-(hi + 1)) + 1 : 1;
      const uint64_t m_hi = static_cast<uint64_t>(-(lo + 1)) + 1;
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
    // Every digit string of this length (else both ends below recurse into it: exponential in the length).
    if (a.find_first_not_of('0') == std::string::npos && z.find_first_not_of('9') == std::string::npos)
      return b_.repeat(digit(), static_cast<int>(a.size()), static_cast<int>(a.size()));
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

// A non-negative decimal bound: integer part, fraction digits without trailing zeros.
struct Bound {
  uint64_t ipart;
  std::string frac;
  bool exclusive;
  bool zero() const { return ipart == 0 && frac.empty(); }
};

// A JSON number's exact decimal value as sign, integer digits and fraction digits (from its shortest
// round-trip text), or nullopt beyond 9e15.
struct Decimal {
  bool negative;
  uint64_t ipart;
  std::string frac;
};

std::optional<Decimal> parse_decimal(const std::string& text) {
  size_t i = 0;
  Decimal d{false, 0, ""};
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  int point = -1;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      point = static_cast<int>(digits.size());
    } else {
      digits.push_back(text[i]);
    }
  }
  if (point < 0) point = static_cast<int>(digits.size());
  if (i < text.size()) point += std::stoi(text.substr(i + 1));
  if (point > 16) return std::nullopt;
  while (point < 0) {
    digits.insert(digits.begin(), '0');
    ++point;
  }
  while (static_cast<int>(digits.size()) < point) digits.push_back('0');
  const std::string ip = digits.substr(0, static_cast<size_t>(point));
  d.frac = digits.substr(static_cast<size_t>(point));
  while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
  d.ipart = ip.empty() ? 0 : std::stoull(ip);
  if (d.ipart > 9'000'000'000'000'000ull) return std::nullopt;
  if (d.ipart == 0 && d.frac.empty()) d.negative = false;
  return d;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options, GrammarBuilder* into = nullptr)
      : root_(root), options_(options), b_(into ? *into : own_) {
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

  // The expression for an instance of `s`: a call of the subschema's rule (rules are shared and may
  // recurse). Its body is built once the outermost value() gets back here, not inside the body that called
  // it: a chain of $refs (each definition naming the next) recursed once per link, and 20 000 links (0.7 MB)
  // overflowed the stack. Subschemas must outlive the compiler (they are in the root or kept_).
  ExprId value(const Json& s, const std::string& path) {
    auto it = rule_of_.find(&s);
    if (it != rule_of_.end()) return b_.call(it->second);
    // Equal subschemas (every {"type": "string"} of an object's properties) share one rule: a $ref names
    // its target from the root, so equal text means the same language wherever it stands. Only small ones
    // are keyed by their text: a large subschema nested 100 deep would be held 100 times.
    constexpr size_t kMaxSharedText = 64 * 1024;
    std::string text = text_size_within(s, kMaxSharedText) ? s.dump() : std::string();
    if (!text.empty()) {
      if (auto same = rule_of_text_.find(text); same != rule_of_text_.end()) {
        rule_of_[&s] = same->second;
        return b_.call(same->second);
      }
    }
    const int rule = b_.new_rule(path);
    rule_of_[&s] = rule;
    if (!text.empty() && text.size() <= kMaxSharedText) rule_of_text_.emplace(std::move(text), rule);
    undefined_.push_back({rule, &s, path});
    if (!defining_) {
      defining_ = true;
      try {
        while (!undefined_.empty()) {
          const Undefined u = std::move(undefined_.back());
          undefined_.pop_back();
          b_.define(u.rule, build(*u.schema, u.path, 0));
        }
      } catch (...) {
        undefined_.clear();  // a refused schema: nothing is left half queued
        defining_ = false;
        throw;
      }
      defining_ = false;
    }
    return b_.call(rule);
  }

  // Whether `s` as text (s.dump()) is at most `bound` bytes, in at most about `bound` steps: a large
  // subschema nested N deep was written out N times only to learn that it was too large to share. Counts
  // at least the dump's bytes (a string's escapes, a number's digits; a non-integer as 24), so a dump
  // follows only a small estimate.
  static bool text_size_within(const Json& s, size_t bound) {
    size_t size = 0;
    const auto add_string = [&size, bound](const std::string& t) {
      size += t.size() + 2;
      for (size_t i = 0; i < t.size() && size <= bound; ++i) {
        const auto c = static_cast<unsigned char>(t[i]);
        if (c < 0x20) size += 5;  // \u00XX (or a shorter escape)
        if (c == '"' || c == '\\') size += 1;
      }
    };
    std::vector<const Json*> todo{&s};
    while (!todo.empty() && size <= bound) {
      const Json& v = *todo.back();
      todo.pop_back();
      if (v.is_string()) {
        add_string(v.get_ref<const std::string&>());
      } else if (v.is_object()) {
        size += 2;
        for (auto& [k, x] : v.items()) {
          add_string(k);
          if ((size += 2) > bound) return false;  // the colon and a comma
          todo.push_back(&x);
        }
      } else if (v.is_array()) {
        size += 2;
        for (const auto& x : v) {
          if (++size > bound) return false;
          todo.push_back(&x);
        }
      } else if (v.is_number_unsigned()) {
        size += std::to_string(v.get<uint64_t>()).size();
      } else if (v.is_number_integer()) {
        size += std::to_string(v.get<int64_t>()).size();
      } else {
        size += v.is_number() ? 24 : 5;  // a double's shortest form, true / false / null
      }
    }
    return size <= bound;
  }

  const Json& resolve(const std::string& ref, const std::string& path) {
    try {
      return resolve_ref(root_, ref);
    } catch (const Error& e) {
      fail(path, e.what());
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

  // Two subschemas that must both hold, as one (booleans included: false wins, true gives way).
  Json merge_subschemas(const Json& a, const Json& b, const std::string& path, int depth) {
    if (a == false || b == false) return false;
    if (a == true) return b;
    if (b == true) return a;
    return merge(flatten(a, path, depth + 1), flatten(b, path, depth + 1), path, depth + 1);
  }

  // properties and additionalProperties of two members, merged name by name: a name only one member
  // declares must also meet the other member's additionalProperties (true when absent), as the spec reads
  // allOf. So {"allOf": [{"properties": {"a": {}}}], "additionalProperties": false} forbids "a".
  void merge_properties(const Json& a, const Json& b, Json& out, const std::string& path, int depth) {
    static const Json kNone = Json::object();
    const Json& pa = a.contains("properties") ? a["properties"] : kNone;
    const Json& pb = b.contains("properties") ? b["properties"] : kNone;
    if (!pa.is_object() || !pb.is_object()) fail(path, "properties must be an object");
    const Json extra_a = a.contains("additionalProperties") ? a["additionalProperties"] : Json(true);
    const Json extra_b = b.contains("additionalProperties") ? b["additionalProperties"] : Json(true);
    // A patternProperties match replaces additionalProperties for its names: exact only in these cases.
    auto declares_more = [](const Json& x, const Json& y) {
      for (auto& [name, sub] : x.items()) {
        if (!y.contains(name)) return true;
      }
      return false;
    };
    if ((a.contains("patternProperties") &&
         (extra_b != true || (extra_a != true && declares_more(pb, pa)))) ||
        (b.contains("patternProperties") &&
         (extra_a != true || (extra_b != true && declares_more(pa, pb))))) {
      fail(path, "allOf: cannot merge patternProperties with another member's additionalProperties");
    }
    Json props = Json::object();
    for (auto& [name, sub] : pa.items()) {
      props[name] = merge_subschemas(sub, pb.contains(name) ? pb[name] : extra_b, path, depth);
    }
    for (auto& [name, sub] : pb.items()) {
      if (!pa.contains(name)) props[name] = merge_subschemas(extra_a, sub, path, depth);
    }
    const Json extra = merge_subschemas(extra_a, extra_b, path, depth);
    out.erase("properties");
    out.erase("additionalProperties");
    if (!props.empty()) out["properties"] = std::move(props);
    if (extra != true) out["additionalProperties"] = extra;
  }

  // Merges allOf members (and a $ref with sibling keywords) into one schema, keyword by keyword.
  Json merge(const Json& a, const Json& b, const std::string& path, int depth) {
    if (depth > 32) fail(path, "allOf nested too deeply to merge");
    // Each merge copies what was merged so far and looks its properties up: an allOf of 6 000 objects
    // (400 KB) took 58 s. Bounded in all, by the keywords and properties of both sides (JSONSchemaBench's
    // largest allOf has 7 members).
    auto weight = [](const Json& j) {
      size_t w = j.is_object() ? j.size() : 1;
      if (j.is_object() && j.contains("properties") && j["properties"].is_object())
        w += j["properties"].size();
      return w;
    };
    merge_work_ += weight(a) + weight(b);
    if (merge_work_ > kMaxMergeWork) {
      fail(path, "allOf / $ref merges too large (more than " + std::to_string(kMaxMergeWork) +
                     " keywords and properties merged)");
    }
    Json out = a;
    if (a.contains("properties") || b.contains("properties") || a.contains("additionalProperties") ||
        b.contains("additionalProperties")) {
      merge_properties(a, b, out, path, depth);
    }
    for (auto& [k, v] : b.items()) {
      if (k == "properties" || k == "additionalProperties") continue;
      if (!out.contains(k)) {
        out[k] = v;
        continue;
      }
      Json& mine = out[k];
      // Keywords whose merge appends need arrays on both sides (the private ones are built as arrays).
      if ((k == "required" || k == kExclude || k == kAbsent) && (!mine.is_array() || !v.is_array()))
        fail(path, "'" + k + "' must be an array");
      if (mine == v) continue;
      if (k == "required") {
        for (const auto& r : v) {
          if (std::find(mine.begin(), mine.end(), r) == mine.end()) mine.push_back(r);
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
      } else if (k == kExclude || k == kAbsent) {
        for (const auto& x : v) mine.push_back(x);
      } else if ((k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties") &&
                 mine.is_number() && v.is_number()) {
        if (v > mine) mine = v;
      } else if ((k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") &&
                 mine.is_number() && v.is_number()) {
        if (v < mine) mine = v;
      } else if (k == "enum" && mine.is_array() && v.is_array()) {
        // Strings (nearly every enum) looked up by hash, other values by a scan: two long enums merged in
        // time linear in their lengths.
        std::unordered_set<std::string> strings;
        Json others = Json::array();
        for (const auto& y : v) {
          if (y.is_string())
            strings.insert(y.get<std::string>());
          else
            others.push_back(y);
        }
        Json both = Json::array();
        for (const auto& x : mine) {
          if (x.is_string() ? strings.count(x.get_ref<const std::string&>()) > 0
                            : std::find(others.begin(), others.end(), x) != others.end()) {
            both.push_back(x);
          }
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
      if (!out["$ref"].is_string()) fail(path, "$ref must be a string");
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
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path, "$ref must be a string");
      if (!has_assertions(s, "$ref")) {
        return value(resolve(s["$ref"].get<std::string>(), path), s["$ref"].get<std::string>());
      }
      return build(keep(flatten(s, path, depth)), path, depth + 1);
    }
    if (s.contains("allOf")) return build(keep(flatten(s, path, depth)), path, depth + 1);
    if (s.contains("enum") || s.contains("const")) return listed(s, path);
    check_keywords(s, path);
    if (s.contains("not")) return build(keep(apply_not(s, path, depth)), path, depth + 1);
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
    std::vector<std::string> types = type_list(s, path);
    if (std::find(types.begin(), types.end(), "number") != types.end()) {
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
    }
    std::vector<ExprId> alts;
    for (const std::string& t : types) {
      if (t == "null") {
        if (!excluded(s, Json(nullptr))) alts.push_back(b_.literal("null"));
      } else if (t == "boolean") {
        if (!excluded(s, Json(true))) alts.push_back(b_.literal("true"));
        if (!excluded(s, Json(false))) alts.push_back(b_.literal("false"));
      } else if (t == "integer")
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

  static bool excluded(const Json& s, const Json& v) {
    if (!s.contains(kExclude)) return false;
    for (const auto& x : s[kExclude]) {
      if (json_equal(x, v)) return true;
    }
    return false;
  }

  // A schema whose instances are listed (enum / const): each listed value is checked against every keyword
  // of the schema, so whatever the keywords, the grammar allows exactly the valid listed values.
  ExprId listed(const Json& s, const std::string& path) {
    const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
    if (!values.is_array()) fail(path, "enum must be an array");
    // An enum's values are checked against the schema without the enum itself, which each of them meets:
    // checking membership too took a scan of the list per value (an enum of 200 000 strings compiled for
    // minutes).
    Json others = s;
    if (!s.contains("const")) others.erase("enum");
    std::vector<ExprId> alts;
    for (const auto& v : values) {
      try {
        if (json_valid(v, others, root_)) alts.push_back(const_value(v));
      } catch (const Error& e) {
        fail(path, e.what());
      }
    }
    return b_.alt(std::move(alts));
  }

  static std::vector<std::string> type_list(const Json& s, const std::string& path) {
    std::vector<std::string> types;
    if (!s.contains("type")) return {"object", "array", "string", "number", "boolean", "null"};
    const Json& t = s["type"];
    if (t.is_string()) return {t.get<std::string>()};
    if (!t.is_array()) fail(path, "type must be a string or a list");
    for (const auto& x : t) {
      if (!x.is_string()) fail(path, "type list members must be strings");
      types.push_back(x.get<std::string>());
    }
    return types;
  }

  // `not` as the other keywords it amounts to, where that is exact: not {} / true (nothing), not {not: X}
  // (X), not {type} (the other types), not {enum / const} (of strings, booleans and null; values of types
  // the schema does not allow anyway), not {required: [one name]} (an object without it). Anything else is
  // a compile error.
  Json apply_not(const Json& s, const std::string& path, int depth) {
    Json out = s;
    Json n = s["not"];
    out.erase("not");
    if (n.is_boolean()) return n.get<bool>() ? Json(false) : out;
    if (!n.is_object()) fail(path, "not must be a schema");
    n = flatten(n, path, depth + 1);
    for (const char* k : {"title", "description", "$comment", "examples", "default", "$id", "$schema"})
      n.erase(k);
    if (n.empty()) return Json(false);
    const std::string name = n.size() == 1 ? n.begin().key() : "";
    if (name == "not") {
      const Json& inner = n["not"];
      if (inner.is_boolean()) return inner.get<bool>() ? out : Json(false);
      return merge(out, flatten(inner, path, depth + 1), path, depth + 1);
    }
    std::vector<std::string> allowed = type_list(out, path);
    auto allows = [&](const std::string& t) {
      return std::find(allowed.begin(), allowed.end(), t) != allowed.end() ||
             (t == "integer" && std::find(allowed.begin(), allowed.end(), "number") != allowed.end());
    };
    if (name == "type") {
      for (const std::string& t : type_list(n, path)) {
        if (t == "integer" && std::find(allowed.begin(), allowed.end(), "number") != allowed.end()) {
          fail(path, "unsupported keyword 'not' (not: {type: integer} on numbers)");
        }
        allowed.erase(std::remove(allowed.begin(), allowed.end(), t), allowed.end());
        if (t == "number")
          allowed.erase(std::remove(allowed.begin(), allowed.end(), "integer"), allowed.end());
      }
      if (allowed.empty()) return Json(false);
      out["type"] = Json(allowed);
      return out;
    }
    if (name == "enum" || name == "const") {
      const Json values = name == "const" ? Json::array({n["const"]}) : n["enum"];
      if (!values.is_array()) fail(path, "enum must be an array");
      for (const auto& v : values) {
        if (v.is_string() || v.is_boolean() || v.is_null()) {
          out[kExclude].push_back(v);
        } else if ((v.is_number() && allows(v.is_number_float() ? "number" : "integer")) ||
                   (v.is_array() && allows("array")) || (v.is_object() && allows("object"))) {
          fail(path,
               "unsupported keyword 'not' (not: {enum} with a number, array or object the schema allows)");
        }
      }
      return out;
    }
    if (name == "required" && n["required"].is_array() && n["required"].size() == 1 &&
        n["required"][0].is_string()) {
      if (!allows("object")) return Json(false);  // a non-object meets `required`: its negation fails
      out["type"] = "object";
      out[kAbsent].push_back(n["required"][0]);
      return out;
    }
    fail(path,
         "unsupported keyword 'not' (only not: {}, {not}, {type}, {enum}, {const} and {required: [one]} are "
         "enforced exactly)");
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
      if (cp == '<' && options_.escape_lt) {
        parts.push_back(b_.alt({b_.literal("\\u003c"), b_.literal("\\u003C")}));
      } else if (cp >= 0x20 && cp < 0x7F) {
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

  // Printable ASCII a JSON string holds unescaped (and without `<` when options_.escape_lt).
  std::vector<ByteRange> text_ascii() const {
    if (options_.escape_lt) return {{0x20, 0x21}, {0x23, 0x3B}, {0x3D, 0x5B}, {0x5D, 0x7F}};
    return {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}};
  }

  ExprId string_char() {
    if (string_char_ >= 0) return string_char_;
    // Raw characters but `"`, `\` and control characters, then escapes. Non-ASCII ones are well-formed
    // UTF-8 only (no overlong forms, no surrogates): byte-level tokens can spell ill-formed sequences, which
    // a client decodes as one U+FFFD per byte, and that breaks maxLength.
    ExprId raw = b_.alt({b_.bytes(text_ascii()), b_.codepoints(0x80, 0x10FFFF)});
    ExprId hex = b_.bytes({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
    // \u escapes of Unicode scalar values only. RFC 8259's grammar also takes a lone surrogate, but strict
    // parsers (nlohmann, serde_json) refuse such a text; a pair is one character, as maxLength counts.
    ExprId d = b_.bytes({{'D', 'D'}, {'d', 'd'}});
    ExprId bmp = b_.alt({b_.seq({b_.bytes({{'0', '9'}, {'A', 'C'}, {'E', 'F'}, {'a', 'c'}, {'e', 'f'}}),
                                 b_.repeat(hex, 3, 3)}),
                         b_.seq({d, b_.bytes({{'0', '7'}}), b_.repeat(hex, 2, 2)})});
    ExprId pair = b_.seq({d, b_.bytes({{'8', '9'}, {'A', 'B'}, {'a', 'b'}}), b_.repeat(hex, 2, 2),
                          b_.literal("\\u"), d, b_.bytes({{'C', 'F'}, {'c', 'f'}}), b_.repeat(hex, 2, 2)});
    ExprId esc = b_.seq({b_.byte('\\'), b_.alt({b_.bytes({{'"', '"'},
                                                          {'\\', '\\'},
                                                          {'/', '/'},
                                                          {'b', 'b'},
                                                          {'f', 'f'},
                                                          {'n', 'n'},
                                                          {'r', 'r'},
                                                          {'t', 't'}}),
                                                b_.seq({b_.byte('u'), b_.alt({bmp, pair})})})});
    string_char_ = b_.alt({raw, esc});
    return string_char_;
  }

  int char_rule() {
    if (char_rule_ >= 0) return char_rule_;
    char_rule_ = b_.new_rule("char");
    b_.define(char_rule_, string_char());
    return char_rule_;
  }

  ExprId plain_string() { return b_.seq({b_.byte('"'), counted_chars(0, kUnbounded)}); }

  ExprId plain_number() {
    ExprId digits = b_.repeat(b_.bytes({{'0', '9'}}), 1, kUnbounded);
    ExprId int_part = b_.alt(
        {b_.byte('0'), b_.seq({b_.bytes({{'1', '9'}}), b_.repeat(b_.bytes({{'0', '9'}}), 0, kUnbounded)})});
    return b_.seq({b_.optional(b_.byte('-')), int_part, b_.optional(b_.seq({b_.byte('.'), digits})),
                   b_.optional(b_.seq({b_.bytes({{'e', 'e'}, {'E', 'E'}}),
                                       b_.optional(b_.bytes({{'+', '+'}, {'-', '-'}})), digits}))});
  }

  // A key or string character written raw (no escapes): its bytes are its text, so automata over raw text
  // (patterns, names) judge it exactly.
  ExprId raw_char() { return b_.alt({b_.bytes(text_ascii()), b_.codepoints(0x80, 0x10FFFF)}); }

  ExprId string(const Json& s, const std::string& path) {
    int min_len = 0, max_len = kUnbounded;
    if (s.contains("minLength")) min_len = count(s["minLength"], path, "minLength");
    if (s.contains("maxLength")) max_len = count(s["maxLength"], path, "maxLength");
    const bool has_length = min_len > 0 || max_len != kUnbounded;
    const char* format = nullptr;
    if (s.contains("format") && s["format"].is_string())
      format = format_regex(s["format"].get<std::string>());
    const bool has_pattern = s.contains("pattern");
    if (has_pattern && !s["pattern"].is_string()) fail(path, "pattern must be a string");
    std::vector<std::string> not_values;
    if (s.contains(kExclude)) {
      for (const auto& v : s[kExclude]) {
        if (v.is_string()) not_values.push_back(v.get<std::string>());
      }
    }
    if (max_len != kUnbounded && max_len > 100000) fail(path, "maxLength above 100000 is not supported");
    if (min_len > 100000) fail(path, "minLength above 100000 is not supported");
    const int constraints = (has_pattern ? 1 : 0) + (format ? 1 : 0) + (has_length ? 1 : 0);
    // With escape_lt a pattern's or format's raw `<` must be refused: intersect with the string characters.
    const bool lt_part = options_.escape_lt && !has_length && (has_pattern || format);
    if (!not_values.empty() && constraints == 0) return string_except(not_values, path);
    try {
      if (constraints > 1 || !not_values.empty() || lt_part) {
        if (std::max(min_len, max_len) > 4096)
          fail(path, "minLength/maxLength above 4096 with pattern or format");
        // Several constraints on one text: their automata intersected.
        std::vector<ProductPart> parts;
        if (has_pattern)
          parts.push_back({compile_regex(b_, s["pattern"].get<std::string>(), {true, true}), true});
        if (format) parts.push_back({compile_regex(b_, format, {true, false}), true});
        if (has_length) parts.push_back({b_.repeat(string_char(), min_len, max_len), true});
        if (lt_part) parts.push_back({b_.repeat(string_char(), 0, kUnbounded), true});
        if (!not_values.empty()) {
          // Excluded values are matched raw, so strings with escapes are left out (no spelling slips past).
          parts.push_back({b_.repeat(raw_char(), 0, kUnbounded), true});
          std::vector<ExprId> names;
          for (const auto& v : not_values) names.push_back(b_.literal(v));
          parts.push_back({b_.alt(std::move(names)), false});
        }
        const bool has_excluded = !not_values.empty();
        ExprId quote = b_.byte('"');
        ExprId body = product_dfa(b_, parts, [&](const std::vector<bool>& matched) {
          return has_excluded && matched.back() ? b_.nothing() : quote;
        });
        return b_.seq({b_.byte('"'), body});
      }
      if (has_pattern) {
        return b_.seq(
            {b_.byte('"'), compile_regex(b_, s["pattern"].get<std::string>(), {true, true}), b_.byte('"')});
      }
    } catch (const Error& e) {
      fail(path, e.what());
    }
    if (format) return b_.seq({b_.byte('"'), compile_regex(b_, format, {true, false}), b_.byte('"')});
    if (!has_length) return plain_string();
    // Counted characters: a compact character automaton copied per count, or for long bounds one call per
    // character (fewer states; masks then need the stack at every character).
    const int copies = max_len == kUnbounded ? min_len + 1 : max_len;
    if (copies > kMaxCountedDfa) {
      return b_.seq({b_.byte('"'), b_.repeat(b_.call(char_rule()), min_len, max_len), b_.byte('"')});
    }
    return b_.seq({b_.byte('"'), counted_chars(min_len, max_len)});
  }

  // String characters, counted (or not: max_len kUnbounded) then the closing quote, determinized, each
  // character boundary marked with the characters left (DfaTable::plain): masks there take the tokens of
  // plain text from a per-vocabulary table by character count and walk only the other tokens (quotes,
  // escapes, partial UTF-8). The tables do not depend on the schema: built once per process and bounds.
  static constexpr int kMaxCountedDfa = 256;
  // With `raw`, characters without escapes (the rest of an additional property's name).
  ExprId counted_chars(int min_len, int max_len, bool raw = false) {
    // The shared tables count `<` as plain text: strings that must escape it keep their own characters.
    if (options_.escape_lt)
      return b_.seq({b_.repeat(raw ? raw_char() : string_char(), min_len, max_len), b_.byte('"')});
    DfaTableCache& cache = counted_string_tables();
    std::shared_ptr<const DfaTable> table = cache.get({min_len, max_len, raw}).value_or(nullptr);
    if (!table) {
      table = counted_table(min_len, max_len, raw);
      cache.put({min_len, max_len, raw}, table, dfa_table_bytes(*table));
    }
    return b_.dfa(table, {b_.byte('"')});
  }

  static std::shared_ptr<const DfaTable> counted_table(int min_len, int max_len, bool raw) {
    static const Json kNone = Json::object();
    SchemaCompiler sc(kNone, JsonSchemaOptions{});
    GrammarBuilder& scratch = sc.b_;
    const ExprId quote = scratch.byte('"');
    const ExprId chars = raw ? sc.raw_char() : sc.string_char();
    const ExprId body = product_dfa(scratch, {{scratch.repeat(chars, min_len, max_len), true}},
                                    [&](const std::vector<bool>&) { return quote; });
    const GrammarBuilder::Node& n = scratch.node(body);
    if (n.kind != GrammarBuilder::Node::kDfa) throw Error("grammar: counted string characters");
    auto table = std::make_shared<DfaTable>(*n.dfa);
    table->plain.assign(table->edges.size(), -1);
    // Boundary k is reached from the start by k plain characters; every plain character (one byte or a
    // well-formed UTF-8 sequence) leads from boundary k to k + 1, so follow 'a'.
    auto next = [&](uint32_t q, uint8_t byte) -> int64_t {
      for (const DfaTable::Edge& e : table->edges[q]) {
        if (byte >= e.lo && byte <= e.hi) return e.to;
      }
      return -1;
    };
    int64_t q = 0;
    for (int k = 0; q >= 0 && table->plain[static_cast<size_t>(q)] < 0; ++k) {
      table->plain[static_cast<size_t>(q)] = max_len == kUnbounded ? INT32_MAX : max_len - k;
      q = next(static_cast<uint32_t>(q), 'a');
    }
    return table;
  }

  ExprId raw_text_char() {
    // Tab, newline, carriage return and printable ASCII but `<` (markup around the text starts with it),
    // then well-formed UTF-8.
    return b_.alt(
        {b_.bytes({{'\t', '\n'}, {'\r', '\r'}, {0x20, 0x3B}, {0x3D, 0x7F}}), b_.codepoints(0x80, 0x10FFFF)});
  }

 public:
  // A string instance of `s` written as its raw text: no quotes, no escapes, no `<`. `s` must allow strings
  // only (type "string", or enum / const of strings); its length, pattern, format, enum and const are
  // enforced.
  ExprId raw_string(const Json& s, const std::string& path) {
    if (s.is_boolean() || !s.is_object()) fail(path, "a raw string argument needs a string schema");
    if (s.contains("enum") || s.contains("const")) {
      const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
      if (!values.is_array()) fail(path, "enum must be an array");
      std::vector<ExprId> alts;
      for (const auto& v : values) {
        try {
          if (v.is_string() && v.get_ref<const std::string&>().find('<') == std::string::npos &&
              json_valid(v, s, root_))
            alts.push_back(b_.literal(v.get<std::string>()));
        } catch (const Error& e) {
          fail(path, e.what());
        }
      }
      return b_.alt(std::move(alts));
    }
    check_keywords(s, path);
    for (const char* k : {"$ref", "allOf", "anyOf", "oneOf", "not"}) {
      if (s.contains(k))
        fail(path, std::string("'") + k + "' on a string argument written as raw text is not supported");
    }
    int min_len = 0, max_len = kUnbounded;
    if (s.contains("minLength")) min_len = count(s["minLength"], path, "minLength");
    if (s.contains("maxLength")) max_len = count(s["maxLength"], path, "maxLength");
    if (max_len != kUnbounded && max_len > 100000) fail(path, "maxLength above 100000 is not supported");
    if (min_len > 100000) fail(path, "minLength above 100000 is not supported");
    const char* format = nullptr;
    if (s.contains("format") && s["format"].is_string())
      format = format_regex(s["format"].get<std::string>());
    const bool has_pattern = s.contains("pattern");
    if (has_pattern && !s["pattern"].is_string()) fail(path, "pattern must be a string");
    if (!has_pattern && !format) {
      const int copies = max_len == kUnbounded ? min_len + 1 : max_len;
      if (copies <= 64) return b_.repeat(raw_text_char(), min_len, max_len);
      if (raw_char_rule_ < 0) {
        raw_char_rule_ = b_.new_rule("raw-char");
        b_.define(raw_char_rule_, raw_text_char());
      }
      return b_.repeat(b_.call(raw_char_rule_), min_len, max_len);
    }
    if (std::max(min_len, max_len) > 4096)
      fail(path, "minLength/maxLength above 4096 with pattern or format");
    try {
      std::vector<ProductPart> parts;
      parts.push_back({b_.repeat(raw_text_char(), min_len, max_len), true});
      if (has_pattern)
        parts.push_back({compile_regex(b_, s["pattern"].get<std::string>(), {false, true}), true});
      if (format) parts.push_back({compile_regex(b_, format, {false, false}), true});
      ExprId done = b_.empty();
      return product_dfa(b_, parts, [&](const std::vector<bool>&) { return done; });
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

  // An instance of `s` as JSON (s a part of the root document).
  ExprId json_value(const Json& s, const std::string& path) { return value(s, path); }

 private:
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
    // A side without a bound stops at 16 digits (about I-JSON's +-(2^53 - 1), RFC 7493): clients parse JSON
    // numbers as doubles, and a longer digit run is no exact integer to them (past 1.8e308 no number at all).
    // Bounds themselves stay within 9e15 (int_bounds).
    if (!lo && !hi) {
      return b_.alt({b_.byte('0'), b_.seq({b_.optional(b_.byte('-')), b_.bytes({{'1', '9'}}),
                                           b_.repeat(b_.bytes({{'0', '9'}}), 0, 15)})});
    }
    return IntRanges(b_).range(lo.value_or(-kMaxUnboundedInteger), hi.value_or(kMaxUnboundedInteger));
  }

  ExprId number(const Json& s, const std::string& path) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                         s.contains("exclusiveMaximum");
    if (!bounded) return plain_number();
    // Bounded numbers are written without an exponent, compared digit by digit with the decimal bounds.
    auto get = [&](const char* key) -> std::optional<Decimal> {
      if (!s.contains(key) || s[key].is_boolean()) return std::nullopt;
      if (!s[key].is_number()) fail(path, std::string(key) + " must be a number");
      auto d = parse_decimal(s[key].dump());
      if (!d) fail(path, std::string(key) + " beyond 9e15 is not supported");
      return d;
    };
    auto less = [](const Decimal& a, const Decimal& b) {  // a < b
      if (a.negative != b.negative) return a.negative;
      const bool mag_less = a.ipart != b.ipart ? a.ipart < b.ipart : a.frac < b.frac;
      const bool same = a.ipart == b.ipart && a.frac == b.frac;
      return a.negative ? !mag_less && !same : mag_less;
    };
    auto flag = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    struct Signed {
      Decimal d;
      bool exclusive;
    };
    std::optional<Signed> lo, hi;
    if (auto d = get("minimum")) lo = Signed{*d, flag("exclusiveMinimum")};
    if (auto d = get("maximum")) hi = Signed{*d, flag("exclusiveMaximum")};
    if (auto d = get("exclusiveMinimum")) {
      if (!lo || !less(*d, lo->d)) lo = Signed{*d, true};
    }
    if (auto d = get("exclusiveMaximum")) {
      if (!hi || !less(hi->d, *d)) hi = Signed{*d, true};
    }
    auto positive = [](const Signed& x) { return !x.d.negative && !(x.d.ipart == 0 && x.d.frac.empty()); };
    auto magnitude_of = [](const Signed& x) { return Bound{x.d.ipart, x.d.frac, x.exclusive}; };
    std::vector<ExprId> options;
    // x >= 0 as its magnitude (a negative lower bound is no bound there).
    if (!hi || positive(*hi) || (!hi->d.negative && !hi->exclusive)) {
      std::optional<Bound> m_lo, m_hi;
      if (lo && !lo->d.negative) m_lo = magnitude_of(*lo);
      if (hi) m_hi = magnitude_of(*hi);
      options.push_back(magnitude(m_lo, m_hi));
    }
    // x < 0 as -m with m > 0: m's lower bound from the upper bound, its upper bound from the lower bound.
    if (!lo || lo->d.negative) {
      std::optional<Bound> m_lo = Bound{0, "", true}, m_hi;
      if (hi && hi->d.negative) m_lo = magnitude_of(*hi);
      if (lo) m_hi = magnitude_of(*lo);
      options.push_back(b_.seq({b_.byte('-'), magnitude(m_lo, m_hi)}));
    }
    return product_dfa(b_, {{b_.alt(std::move(options)), true}, {double_exact_decimals(), true}},
                       [&](const std::vector<bool>&) { return b_.empty(); });
  }

  // The decimals a client reads back as doubles in the same order against the bounds, which are doubles
  // written in their shortest form (nlohmann's dump). The digit comparison above is exact on decimals, but
  // 0.10000000000000000000000000030852 is the double 0.1, so a validator refuses it for exclusiveMinimum 0.1
  // (found by the grammar_bytes campaign). A decimal of at most 15 significant digits (DBL_DIG) reads back as
  // itself, so it never reads as the same double as a different such decimal, nor as a bound of 16 or 17
  // digits (that bound would have a shorter form), and reading is monotonic. So: integers as they are (exact
  // doubles up to 2^53, and the bounds are within 9e15); with a fraction, 15 significant digits at most,
  // the first of them within 305 places of the point (1e-305 and up are normal doubles, not zero).
  ExprId double_exact_decimals() {
    ExprId digit = b_.bytes({{'0', '9'}});
    std::vector<ExprId> forms = {
        b_.repeat(digit, 1, kUnbounded),
        b_.seq({b_.byte('0'), b_.byte('.'), b_.repeat(b_.byte('0'), 0, 290), b_.repeat(digit, 1, 15)})};
    for (int int_digits = 1; int_digits < 15; ++int_digits) {
      forms.push_back(b_.seq({b_.bytes({{'1', '9'}}), b_.repeat(digit, int_digits - 1, int_digits - 1),
                              b_.byte('.'), b_.repeat(digit, 1, 15 - int_digits)}));
    }
    return b_.seq({b_.optional(b_.byte('-')), b_.alt(std::move(forms))});
  }

  // Fraction digits F (after the point) with 0.F >= 0.D (> when strict), from digit i of D on.
  ExprId frac_ge(const std::string& d, size_t i, bool strict) {
    ExprId digits = b_.repeat(b_.bytes({{'0', '9'}}), 0, kUnbounded);
    if (i == d.size()) return strict ? b_.seq({digits, b_.bytes({{'1', '9'}}), digits}) : digits;
    const auto c = static_cast<uint8_t>(d[i]);
    return b_.alt({b_.seq({b_.bytes({{static_cast<uint8_t>(c + 1), '9'}}), digits}),
                   b_.seq({b_.byte(c), frac_ge(d, i + 1, strict)})});
  }
  // Fraction digits F with 0.F <= 0.D (< when strict), from digit i of D on (D has no trailing zeros).
  ExprId frac_le(const std::string& d, size_t i, bool strict) {
    ExprId digits = b_.repeat(b_.bytes({{'0', '9'}}), 0, kUnbounded);
    if (i == d.size()) return strict ? b_.nothing() : b_.repeat(b_.byte('0'), 0, kUnbounded);
    const auto c = static_cast<uint8_t>(d[i]);
    std::vector<ExprId> options;
    if (i > 0) options.push_back(b_.empty());  // 0 < 0.D[i..]
    if (c > '0') options.push_back(b_.seq({b_.bytes({{'0', static_cast<uint8_t>(c - 1)}}), digits}));
    options.push_back(b_.seq({b_.byte(c), frac_le(d, i + 1, strict)}));
    return b_.alt(std::move(options));
  }

  // The optional fraction part (".digits") of a number whose integer part equals the lower and/or upper
  // bound's.
  ExprId fraction(const std::optional<Bound>& lo, const std::optional<Bound>& hi) {
    ExprId dot = b_.byte('.');
    std::vector<ExprId> parts;
    if (lo) {
      // Without a fraction the value is the integer part: allowed when the bound's fraction is 0, inclusive.
      ExprId absent = lo->frac.empty() && !lo->exclusive ? b_.empty() : b_.nothing();
      parts.push_back(b_.alt({absent, b_.seq({dot, nonempty(frac_ge(lo->frac, 0, lo->exclusive))})}));
    }
    if (hi) {
      ExprId absent = hi->frac.empty() && hi->exclusive ? b_.nothing() : b_.empty();
      parts.push_back(b_.alt({absent, b_.seq({dot, nonempty(frac_le(hi->frac, 0, hi->exclusive))})}));
    }
    if (parts.empty()) return b_.optional(b_.seq({dot, b_.repeat(b_.bytes({{'0', '9'}}), 1, kUnbounded)}));
    if (parts.size() == 1) return parts[0];
    return product_dfa(b_, {{parts[0], true}, {parts[1], true}},
                       [&](const std::vector<bool>&) { return b_.empty(); });
  }

  // `e` without the empty string: intersected with one digit or more.
  ExprId nonempty(ExprId e) {
    return product_dfa(b_, {{e, true}, {b_.repeat(b_.bytes({{'0', '9'}}), 1, kUnbounded), true}},
                       [&](const std::vector<bool>&) { return b_.empty(); });
  }

  // Non-negative decimals I(.F)? within decimal bounds.
  ExprId magnitude(std::optional<Bound> lo, std::optional<Bound> hi) {
    IntRanges ir(b_);
    ExprId frac_any = b_.optional(b_.seq({b_.byte('.'), b_.repeat(ir.digit(), 1, kUnbounded)}));
    std::vector<ExprId> options;
    std::set<uint64_t> special;
    if (lo) special.insert(lo->ipart);
    if (hi) special.insert(hi->ipart);
    for (uint64_t v : special) {
      if (lo && v < lo->ipart) continue;
      if (hi && v > hi->ipart) continue;
      const std::optional<Bound> l = lo && v == lo->ipart ? lo : std::nullopt;
      const std::optional<Bound> h = hi && v == hi->ipart ? hi : std::nullopt;
      options.push_back(b_.seq({ir.nonneg(v, v), fraction(l, h)}));
    }
    // The integer parts strictly between the bounds take any fraction.
    const uint64_t from = lo ? lo->ipart + 1 : 0;
    if (!hi) {
      options.push_back(b_.seq({ir.nonneg(from, std::nullopt), frac_any}));
    } else if (hi->ipart >= 1 && from <= hi->ipart - 1) {
      options.push_back(b_.seq({ir.nonneg(from, hi->ipart - 1), frac_any}));
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
    if (prefix.size() > 10000) fail(path, "more than 10000 prefixItems are not supported");
    auto element = [&](size_t i) {
      const std::string p = path + "/items/" + std::to_string(i);
      return i < prefix.size() ? value(*prefix[i], p) : value(*rest, path + "/items");
    };
    // tail(i): elements from position i on, each after a separator. Built from the last prefix item back
    // (a recursion per item overflowed the stack at 200 000 prefixItems: SIGSEGV in Release).
    const auto tail = [&]() -> ExprId {
      size_t stop = prefix.size();  // tail(i) for i >= stop needs no later tail
      if (hi >= 0) stop = std::min(stop, static_cast<size_t>(hi));
      const size_t last = std::max<size_t>(stop, 1);
      ExprId t = b_.empty();
      if (!(hi >= 0 && static_cast<int64_t>(last) >= hi) && rest_allowed) {
        const int min = std::max(0, lo - static_cast<int>(last));
        const int max = hi < 0 ? kUnbounded : static_cast<int>(hi - static_cast<int64_t>(last));
        t = b_.repeat(b_.seq({sep(), element(last)}), min, max);
      }
      for (size_t i = last; i-- > 1;) {
        ExprId one = b_.seq({sep(), element(i), t});
        t = static_cast<int>(i) < lo ? one : b_.optional(one);
      }
      return t;
    };
    ExprId elements = b_.empty();
    if (hi != 0 && (prefix.size() > 0 || rest_allowed)) {
      const ExprId first = element(0);
      elements = b_.seq({first, tail(), ws_});
    }
    if (lo == 0) elements = b_.optional(elements);
    return b_.seq({b_.byte('['), ws_, elements, b_.byte(']')});
  }

  // Any JSON string except the given ones (additional property names); keys containing escapes are left out
  // so that no spelling of a declared name can pass. The trie below recurses once per byte of a name, so
  // names are bounded: a 200 KB `not: {const: ...}` overflowed the stack of a Release build (SIGSEGV).
  static constexpr size_t kMaxExceptNameBytes = 1024;
  ExprId string_except(const std::vector<std::string>& names, const std::string& path) {
    for (const auto& n : names) {
      if (n.size() > kMaxExceptNameBytes) {
        fail(path, "a property name or excluded string longer than " + std::to_string(kMaxExceptNameBytes) +
                       " bytes is not supported");
      }
    }
    // Shared rules: the rest of a key once it left the trie, and a non-ASCII character followed by that.
    if (key_rest_rule_ < 0) {
      key_rest_rule_ = b_.new_rule("key-rest");
      // Free text: its masks take the plain-text tokens from the per-vocabulary table (DfaTable::plain), and
      // the walks of the names' trie states stop where they reach it (a key that left the trie allows ~55k
      // tokens on a 131k vocabulary).
      b_.define(key_rest_rule_, counted_chars(0, kUnbounded, true));
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
        if (c != '"' && c != '\\' && !(options_.escape_lt && c == '<') &&
            !by_byte.count(static_cast<uint8_t>(c))) {
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

  // The parts of a product over a property name's raw text that enforce a propertyNames schema.
  void name_parts(const Json& schema, const std::string& path, std::vector<ProductPart>& parts) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) parts.push_back({b_.nothing(), true});
      return;
    }
    const Json s = flatten(schema, path, 0);
    for (auto& [k, v] : s.items()) {
      if (k == "pattern") {
        parts.push_back({compile_regex(b_, v.get<std::string>(), {false, true}), true});
      } else if (k == "format") {
        if (const char* re = format_regex(v.get<std::string>()))
          parts.push_back({compile_regex(b_, re), true});
      } else if (k == "minLength" || k == "maxLength") {
        const int lo = s.contains("minLength") ? count(s["minLength"], path, "minLength") : 0;
        const int hi = s.contains("maxLength") ? count(s["maxLength"], path, "maxLength") : kUnbounded;
        if (k == "minLength" || !s.contains("minLength"))
          parts.push_back({b_.repeat(raw_char(), lo, hi), true});
      } else if (k == "enum" || k == "const") {
        const Json values = k == "const" ? Json::array({v}) : v;
        std::vector<ExprId> names;
        for (const auto& x : values) {
          if (x.is_string()) names.push_back(b_.literal(x.get<std::string>()));
        }
        parts.push_back({b_.alt(std::move(names)), true});
      } else if (k == "type") {
        const auto types = type_list(s, path);
        if (std::find(types.begin(), types.end(), "string") == types.end())
          parts.push_back({b_.nothing(), true});
      } else if (assertion_keywords().count(k) || unsupported_keywords().count(k)) {
        fail(path, "propertyNames with '" + k + "' is not supported");
      }
    }
  }

  // Additional members when patternProperties or propertyNames constrain names: a key's raw text runs
  // through the automata of the declared names, every pattern and propertyNames together; at the closing
  // quote the patterns it matched pick the value's schema (all of them merged), or additionalProperties.
  ExprId keyed_member(const Json& s, const std::vector<std::string>& declared,
                      const std::vector<std::pair<std::string, const Json*>>& patterns,
                      const Json& additional, const std::string& path) {
    std::vector<ProductPart> parts;
    parts.push_back({b_.repeat(raw_char(), 0, kUnbounded), true});
    std::vector<ExprId> names;
    for (const auto& n : declared) names.push_back(b_.literal(n));
    parts.push_back({b_.alt(std::move(names)), false});
    for (const auto& [pattern, sub] : patterns)
      parts.push_back({compile_regex(b_, pattern, {false, true}), false});
    if (s.contains("propertyNames")) name_parts(s["propertyNames"], path + "/propertyNames", parts);
    const bool additional_allowed = !(additional.is_boolean() && !additional.get<bool>());
    ExprId body = product_dfa(b_, parts, [&](const std::vector<bool>& matched) {
      if (matched[1]) return b_.nothing();  // a declared name: only in its place
      std::vector<size_t> hits;
      for (size_t i = 0; i < patterns.size(); ++i) {
        if (matched[2 + i]) hits.push_back(i);
      }
      ExprId v;
      if (hits.empty()) {
        if (!additional_allowed) return b_.nothing();
        v = value(additional, path + "/additionalProperties");
      } else if (hits.size() == 1) {
        v = value(*patterns[hits[0]].second, path + "/patternProperties/" + patterns[hits[0]].first);
      } else {
        // Names matching several patterns meet all their schemas; where those cannot be merged (or no
        // value meets them all) such names are left out: fewer instances, never an invalid one.
        Json merged;
        try {
          merged = flatten(*patterns[hits[0]].second, path, 1);
          for (size_t i = 1; i < hits.size(); ++i) {
            merged =
                merge(merged, flatten(*patterns[hits[i]].second, path, 1), path + "/patternProperties", 1);
          }
        } catch (const Error&) {
          return b_.nothing();
        }
        v = value(keep(std::move(merged)), path + "/patternProperties");
      }
      return b_.seq({b_.byte('"'), colon(), v});
    });
    return b_.seq({b_.byte('"'), body});
  }

  ExprId object_of(const Json& s, const std::string& path) {
    static const Json kTrue = true;
    std::vector<std::pair<std::string, const Json*>> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail(path, "properties must be an object");
      for (auto& [k, v] : s["properties"].items()) props.emplace_back(k, &v);
    }
    std::set<std::string> required;
    std::vector<std::string> required_order;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "required must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(path, "required members must be strings");
        if (required.insert(r.get<std::string>()).second) required_order.push_back(r.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, const Json*>> patterns;
    if (s.contains("patternProperties")) {
      if (!s["patternProperties"].is_object()) fail(path, "patternProperties must be an object");
      // A member name is matched against all of them at once (one automaton per pattern, stepped
      // together): 3 000 took 4 s. JSONSchemaBench's most is 9.
      if (s["patternProperties"].size() > kMaxPatternProperties) {
        fail(path,
             "more than " + std::to_string(kMaxPatternProperties) + " patternProperties are not supported");
      }
      for (auto& [k, v] : s["patternProperties"].items()) patterns.emplace_back(k, &v);
    }
    const Json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : &kTrue;
    // A required but undeclared name is an additional member: its value meets the patternProperties that
    // match it (merged below) or else additionalProperties, and where that is false nothing meets the schema.
    std::unordered_set<std::string> named;
    for (const auto& p : props) named.insert(p.first);
    for (const auto& r : required_order) {
      if (!named.insert(r).second) continue;
      bool patterned = false;
      try {
        for (const auto& pattern : patterns) patterned = patterned || pattern_matches(pattern.first, r);
      } catch (const Error& e) {
        fail(path, std::string("patternProperties: ") + e.what());
      }
      if (!patterned && additional->is_boolean() && !additional->get<bool>()) return b_.nothing();
      props.emplace_back(r, patterned ? &kTrue : additional);
    }
    std::set<std::string> absent;
    if (s.contains(kAbsent)) {
      for (const auto& a : s[kAbsent]) absent.insert(a.get<std::string>());
    }
    // Names never written as additional members: the declared ones (in their place only) and absent ones.
    std::vector<std::string> declared(absent.begin(), absent.end());
    for (const auto& p : props) declared.push_back(p.first);
    // Declared properties: dropped when absent or refused by propertyNames; patternProperties apply too.
    std::vector<std::pair<std::string, const Json*>> kept;
    for (auto p : props) {
      bool allowed = !absent.count(p.first);
      try {
        if (allowed && s.contains("propertyNames"))
          allowed = json_valid(Json(p.first), s["propertyNames"], root_);
        std::vector<const Json*> also;
        for (const auto& [pattern, sub] : patterns) {
          if (pattern_matches(pattern, p.first)) also.push_back(sub);
        }
        if (allowed && !also.empty()) {
          Json merged = flatten(*p.second, path, 1);
          for (const Json* a : also)
            merged = merge(merged, flatten(*a, path, 1), path + "/patternProperties", 1);
          p.second = &keep(std::move(merged));
        }
      } catch (const Error& e) {
        fail(path, e.what());
      }
      if (allowed) {
        kept.push_back(p);
      } else if (required.count(p.first)) {
        return b_.nothing();
      }
    }
    props = std::move(kept);
    ExprId add_kv = b_.nothing();
    if (!patterns.empty() || s.contains("propertyNames")) {
      try {
        add_kv = keyed_member(s, declared, patterns, *additional, path);
      } catch (const Error& e) {
        fail(path, std::string("patternProperties/propertyNames: ") + e.what());
      }
    } else if (!(additional->is_boolean() && !additional->get<bool>())) {
      add_kv = b_.seq(
          {string_except(declared, path), colon(), value(*additional, path + "/additionalProperties")});
    }
    const bool additional_allowed = add_kv != b_.nothing();
    if (additional_allowed) {
      const int r = b_.new_rule(path + "/additional");
      b_.define(r, add_kv);
      add_kv = b_.call(r);
    }
    int min_p = 0, max_p = -1;
    if (s.contains("minProperties")) min_p = count(s["minProperties"], path, "minProperties");
    if (s.contains("maxProperties")) max_p = count(s["maxProperties"], path, "maxProperties");
    if (max_p >= 0 && min_p > max_p) return b_.nothing();
    const size_t n = props.size();
    // Members counted up to `cap` (counts above it are alike): first[i][c] / rest[i][c]: members from
    // property i on, with none / c already written.
    const int cap = max_p >= 0 ? max_p : min_p;
    if ((n + 1) * static_cast<size_t>(cap + 1) > 20000)
      fail(path, "minProperties/maxProperties too large for this many properties");
    auto at = [&](size_t i, int c) { return i * static_cast<size_t>(cap + 1) + static_cast<size_t>(c); };
    std::vector<int> first((n + 1) * static_cast<size_t>(cap + 1)), rest(first.size());
    for (size_t i = 0; i <= n; ++i) {
      for (int c = 0; c <= cap; ++c) {
        const std::string suffix = std::to_string(i) + (cap ? "/" + std::to_string(c) : "");
        first[at(i, c)] = b_.new_rule(path + "/members" + suffix);
        rest[at(i, c)] = b_.new_rule(path + "/more" + suffix);
      }
    }
    for (int c = 0; c <= cap; ++c) {
      const int need = std::max(0, min_p - c);
      const int room = max_p >= 0 ? max_p - c : kUnbounded;
      if (additional_allowed) {
        auto more = [&](int lo, int hi) { return b_.repeat(b_.seq({sep(), add_kv}), lo, hi); };
        ExprId some =
            room == 0
                ? b_.nothing()
                : b_.seq(
                      {add_kv, more(std::max(0, need - 1), room == kUnbounded ? kUnbounded : room - 1), ws_});
        b_.define(first[at(n, c)], need == 0 ? b_.optional(some) : some);
        b_.define(rest[at(n, c)], b_.seq({more(need, room), ws_}));
      } else {
        b_.define(first[at(n, c)], need == 0 ? b_.empty() : b_.nothing());
        b_.define(rest[at(n, c)], need == 0 ? ws_ : b_.nothing());
      }
    }
    for (size_t i = n; i-- > 0;) {
      const std::string p = path + "/properties/" + props[i].first;
      ExprId kv = b_.seq({string_literal(props[i].first), colon(), value(*props[i].second, p)});
      const bool optional = !required.count(props[i].first);
      for (int c = 0; c <= cap; ++c) {
        const bool over = max_p >= 0 && c + 1 > max_p;
        const int c1 = std::min(c + 1, cap);
        std::vector<ExprId> f, r;
        if (!over) {
          f.push_back(b_.seq({kv, b_.call(rest[at(i + 1, c1)])}));
          r.push_back(b_.seq({sep(), kv, b_.call(rest[at(i + 1, c1)])}));
        }
        if (optional) {
          f.push_back(b_.call(first[at(i + 1, c)]));
          r.push_back(b_.call(rest[at(i + 1, c)]));
        }
        b_.define(first[at(i, c)], b_.alt(std::move(f)));
        b_.define(rest[at(i, c)], b_.alt(std::move(r)));
      }
    }
    return b_.seq({b_.byte('{'), ws_, b_.call(first[at(0, 0)]), b_.byte('}')});
  }

  const Json& root_;
  JsonSchemaOptions options_;
  GrammarBuilder own_;
  GrammarBuilder& b_;
  ExprId ws_;
  ExprId string_char_ = -1;
  int char_rule_ = -1;
  int raw_char_rule_ = -1;
  int key_rest_rule_ = -1;
  int key_nonascii_rule_ = -1;
  int any_rule_ = -1;
  std::map<const Json*, int> rule_of_;
  static constexpr size_t kMaxMergeWork = size_t{1} << 20;
  size_t merge_work_ = 0;
  std::unordered_map<std::string, int> rule_of_text_;
  struct Undefined {
    int rule;
    const Json* schema;
    std::string path;
  };
  std::vector<Undefined> undefined_;  // rules value() made whose bodies are still to build
  bool defining_ = false;
  std::deque<Json> kept_;
};

// Runs the compiler; a nlohmann exception out of it is a keyword whose type it did not check.
template <class F>
auto types_checked(const std::string& where, F&& compile) {
  try {
    return compile();
  } catch (const nlohmann::json::exception& e) {
    throw UncheckedSchemaType(where + ": a keyword's value has the wrong type: " + e.what());
  }
}

}  // namespace

struct JsonSchemaEmbedder::Impl {
  Impl(GrammarBuilder& b, const Json& root, const JsonSchemaOptions& options) : compiler(root, options, &b) {}
  SchemaCompiler compiler;
};

JsonSchemaEmbedder::JsonSchemaEmbedder(GrammarBuilder& b, const nlohmann::ordered_json& root,
                                       const JsonSchemaOptions& options)
    : impl_(std::make_unique<Impl>(b, root, options)) {}
JsonSchemaEmbedder::~JsonSchemaEmbedder() = default;

ExprId JsonSchemaEmbedder::value(const nlohmann::ordered_json& schema, const std::string& path) {
  return types_checked("JSON Schema at " + path, [&] { return impl_->compiler.json_value(schema, path); });
}

ExprId JsonSchemaEmbedder::raw_string(const nlohmann::ordered_json& schema, const std::string& path) {
  return types_checked("JSON Schema at " + path, [&] { return impl_->compiler.raw_string(schema, path); });
}

Grammar compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options) {
  Json schema;
  try {
    // Bounded (depth 128, time linear in the text): a schema text may come straight from a request.
    schema = parse_json_bounded<Json>(schema_json);
  } catch (const std::exception& e) {
    throw Error(std::string("JSON Schema is not valid JSON: ") + e.what());
  }
  return types_checked("JSON Schema", [&] { return SchemaCompiler(schema, options).compile(); });
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
