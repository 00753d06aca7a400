#include "grammar/tool_call.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <set>

#include "spark/error.h"

namespace spark::grammar {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

// Bare text of an argument: tab, newline, carriage return, printable ASCII but `<`, well-formed UTF-8.
ExprId text_char(GrammarBuilder& b) {
  return b.alt(
      {b.bytes({{'\t', '\n'}, {'\r', '\r'}, {0x20, 0x3B}, {0x3D, 0x7F}}), b.codepoints(0x80, 0x10FFFF)});
}

ExprId key_value(GrammarBuilder& b, const std::string& key, ExprId value) {
  return b.seq({b.literal("<arg_key>" + key + "</arg_key><arg_value>"), value, b.literal("</arg_value>")});
}

// A tool's arguments held to its parameters schema.
ExprId schema_arguments(GrammarBuilder& b, const ToolSchema& tool, const JsonSchemaOptions& options) {
  const Json& p = tool.parameters;
  const std::string where = "tool '" + tool.name + "' parameters";
  if (p.is_null() || (p.is_object() && p.empty())) return b.empty();
  if (!p.is_object()) throw Error(where + ": must be a JSON Schema object");
  for (const char* k : {"$ref", "allOf", "anyOf", "oneOf", "not", "if"}) {
    if (p.contains(k))
      throw Error(where + ": '" + k +
                  "' at the top is not supported (describe the arguments with properties)");
  }
  if (p.contains("type")) {
    const Json& t = p["type"];
    if (!t.is_string() || t.get_ref<const std::string&>() != "object")
      throw Error(where + ": type must be \"object\"");
  }
  std::vector<std::pair<std::string, const Json*>> props;
  if (p.contains("properties")) {
    if (!p["properties"].is_object()) throw Error(where + ": properties must be an object");
    for (auto& [k, v] : p["properties"].items()) props.emplace_back(k, &v);
  }
  std::set<std::string> required;
  if (p.contains("required")) {
    if (!p["required"].is_array()) throw Error(where + ": required must be an array");
    for (const auto& r : p["required"]) {
      if (!r.is_string()) throw Error(where + ": required members must be strings");
      required.insert(r.get<std::string>());
    }
  }
  static const Json kAny = true;
  for (const auto& r : required) {
    if (std::none_of(props.begin(), props.end(), [&](const auto& x) { return x.first == r; }))
      props.emplace_back(r, &kAny);  // required but undeclared: any JSON value under that name
  }
  JsonSchemaEmbedder embed(b, p, options);
  std::vector<ExprId> parts;
  for (const auto& [name, schema] : props) {
    if (name.empty() || name.find('<') != std::string::npos)
      throw Error(where + ": parameter name '" + name + "' cannot be written in the tool-call syntax");
    const std::string path = "#/properties/" + name;
    const ExprId value =
        tool_parameter_is_text(*schema) ? embed.raw_string(*schema, path) : embed.value(*schema, path);
    const ExprId kv = key_value(b, name, value);
    parts.push_back(required.count(name) ? kv : b.optional(kv));
  }
  return b.seq(std::move(parts));
}

// Any arguments: keys and values as bare text.
ExprId free_arguments(GrammarBuilder& b) {
  ExprId ch = text_char(b);
  ExprId kv = b.seq({b.literal("<arg_key>"), b.repeat(ch, 1, kUnbounded), b.literal("</arg_key><arg_value>"),
                     b.repeat(ch, 0, kUnbounded), b.literal("</arg_value>")});
  return b.repeat(kv, 0, kUnbounded);
}

// Text without `<tool_call>` (a matcher of the tag, Knuth-Morris-Pratt style): it may end anywhere, and
// once the tag is complete `after` follows.
ExprId text_until_call(GrammarBuilder& b, ExprId after) {
  const std::string_view tag = kCallOpen;
  const size_t n = tag.size();
  std::vector<size_t> fail(n + 1, 0);
  for (size_t i = 1, k = 0; i < n; ++i) {
    while (k > 0 && tag[i] != tag[k]) k = fail[k];
    if (tag[i] == tag[k]) ++k;
    fail[i + 1] = k;
  }
  DfaTable t;
  t.edges.resize(n + 1);
  t.exit.assign(n + 1, 0);
  t.exit[n] = 1;
  for (size_t s = 0; s < n; ++s) {
    std::vector<uint32_t> to(256);
    for (int c = 0; c < 256; ++c) {
      size_t k = s;
      while (k > 0 && tag[k] != static_cast<char>(c)) k = fail[k];
      if (tag[k] == static_cast<char>(c)) ++k;
      to[static_cast<size_t>(c)] = static_cast<uint32_t>(k);
    }
    for (int lo = 0; lo < 256;) {
      int hi = lo;
      while (hi < 255 && to[static_cast<size_t>(hi + 1)] == to[static_cast<size_t>(lo)]) ++hi;
      t.edges[s].push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to[static_cast<size_t>(lo)]});
      lo = hi + 1;
    }
  }
  return b.dfa(std::move(t), {b.empty(), after});
}

}  // namespace

bool tool_parameter_is_text(const Json& schema) {
  // The parser's reading of a schema's types (server/tool_call_parser_tools.cpp schema_types): text
  // exactly when strings are the only type it finds.
  struct Types {
    bool string = false, other = false;
  };
  std::function<Types(const Json&)> types = [&](const Json& s) -> Types {
    Types t;
    if (!s.is_object()) return t;
    auto bit = [&](const std::string& name) {
      if (name == "string")
        t.string = true;
      else if (name == "integer" || name == "number" || name == "boolean" || name == "null" ||
               name == "object" || name == "array")
        t.other = true;
    };
    if (s.contains("type")) {
      const Json& ty = s["type"];
      if (ty.is_string()) bit(ty.get<std::string>());
      if (ty.is_array()) {
        for (const auto& x : ty) {
          if (x.is_string()) bit(x.get<std::string>());
        }
      }
      return t;
    }
    if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) {
      for (const auto& v : s["enum"]) (v.is_string() ? t.string : t.other) = true;
      return t;
    }
    if (s.contains("const")) {
      (s["const"].is_string() ? t.string : t.other) = true;
      return t;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key) || !s[key].is_array() || s[key].empty()) continue;
      for (const auto& branch : s[key]) {
        const Types bt = types(branch);
        if (!bt.string && !bt.other) return Types{};  // an unconstrained branch: no types at all
        t.string |= bt.string;
        t.other |= bt.other;
      }
      return t;
    }
    if (s.contains("properties")) t.other = true;
    return t;
  };
  const Types t = types(schema);
  return t.string && !t.other;
}

Grammar tool_call_grammar(const std::vector<ToolSchema>& tools, const ToolCallGrammarOptions& options) {
  if (tools.empty()) throw Error("no tool to call");
  JsonSchemaOptions json = options.json;
  json.escape_lt = true;
  GrammarBuilder b;
  // After `<tool_call>`: one of the tools' names, its arguments, the close tag (one rule, so repeated calls
  // share its automaton).
  const int body = b.new_rule("call-body");
  std::vector<ExprId> alts;
  std::set<std::string> seen;
  for (const ToolSchema& tool : tools) {
    if (tool.name.empty() || tool.name.find('<') != std::string::npos)
      throw Error("tool name '" + tool.name + "' cannot be written in the tool-call syntax");
    if (!seen.insert(tool.name).second) continue;
    const ExprId args = tool.schema ? schema_arguments(b, tool, json) : free_arguments(b);
    alts.push_back(b.seq({b.literal(tool.name), args}));
  }
  b.define(body, b.seq({b.alt(std::move(alts)), b.literal(kCallClose)}));
  const ExprId more_calls =
      options.parallel ? b.repeat(b.seq({b.literal(kCallOpen), b.call(body)}), 0, kUnbounded) : b.empty();
  const int root = b.new_rule("root");
  if (options.free_text) {
    b.define(root, text_until_call(b, b.seq({b.call(body), more_calls})));
  } else {
    b.define(root, b.seq({b.literal(kCallOpen), b.call(body), more_calls}));
  }
  return compile_grammar(b, root);
}

}  // namespace spark::grammar
