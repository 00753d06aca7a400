#include "server/tool_call_constraint_grammar.h"

#include <algorithm>
#include <map>
#include <memory>

#include "server/tool_call_parser_tools.h"
#include "spark/error.h"

namespace spark {

uint32_t TriePool::add(const std::vector<std::pair<std::string, int32_t>>& entries) {
  // Built as a pointer tree, then packed breadth-first so that every node's edges are contiguous.
  struct Temp {
    std::map<uint8_t, uint32_t> children;
    int32_t terminal = kNone;
  };
  std::vector<Temp> temp(1);
  for (const auto& [text, value] : entries) {
    uint32_t at = 0;
    for (const char ch : text) {
      const auto byte = static_cast<uint8_t>(ch);
      auto it = temp[at].children.find(byte);
      if (it == temp[at].children.end()) {
        temp.emplace_back();
        it = temp[at].children.emplace(byte, static_cast<uint32_t>(temp.size() - 1)).first;
      }
      at = it->second;
    }
    if (temp[at].terminal == kNone) temp[at].terminal = value;  // the first entry of a text wins
  }
  const auto base = static_cast<uint32_t>(nodes_.size());
  std::vector<uint32_t> order{0};
  std::vector<uint32_t> packed(temp.size());
  for (size_t i = 0; i < order.size(); ++i) {
    packed[order[i]] = base + static_cast<uint32_t>(i);
    for (const auto& [byte, child] : temp[order[i]].children) order.push_back(child);
  }
  nodes_.resize(base + temp.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const Temp& t = temp[order[i]];
    Node& n = nodes_[base + i];
    n.first_edge = static_cast<uint32_t>(edge_byte_.size());
    n.edge_count = static_cast<uint32_t>(t.children.size());
    n.terminal = t.terminal;
    for (const auto& [byte, child] : t.children) {
      edge_byte_.push_back(byte);
      edge_child_.push_back(packed[child]);
    }
  }
  // Children come after their parent in breadth-first order, so a backward pass sees them first.
  for (size_t i = order.size(); i-- > 0;) {
    Node& n = nodes_[base + i];
    if (n.terminal >= 0 && n.terminal < 64) n.subtree |= uint64_t{1} << n.terminal;
    for (uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e)
      n.subtree |= nodes_[edge_child_[e]].subtree;
  }
  return base;
}

namespace {

// Text the Spark syntax cannot carry inside a name or value: `<` would start a tag.
bool writable(std::string_view text) {
  return text.find('<') == std::string_view::npos;
}

bool writable_name(std::string_view name) {
  if (name.empty() || !writable(name)) return false;
  for (const char c : name) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '{')
      return false;  // the parser ends names there
  }
  return true;
}

bool writable_key(std::string_view key) {
  if (key.empty() || !writable(key)) return false;
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  return !space(key.front()) && !space(key.back());  // the parser trims keys
}

}  // namespace

ConstraintGrammar::ConstraintGrammar(const nlohmann::json& tools, const std::string& forced_name,
                                     ToolCallConstraintOptions options)
    : options_(options) {
  SchemaNode free;
  free.types = kJsonAnyType;
  free.free = true;
  free.free_keys = true;
  free.items = 0;
  free.max_items = options_.max_free_members;
  nodes_.push_back(free);

  const ToolRegistry registry(tools);
  std::vector<std::pair<std::string, int32_t>> names;
  for (const ToolInfo& info : registry.tools()) {
    if (!forced_name.empty() && info.name != forced_name) continue;
    if (!writable_name(info.name)) {
      if (!forced_name.empty())
        throw Error("tool name '" + info.name + "' cannot be generated in tool-call syntax");
      continue;
    }
    SchemaNode params;
    params.types = kJsonObject;
    compile_object(params, info.parameters.is_object() ? info.parameters : nlohmann::json::object(), 1,
                   info.name);
    params.free_keys = false;  // a tool's own arguments are never free: no declared parameter, no argument
    nodes_.push_back(std::move(params));
    names.emplace_back(info.name, static_cast<int32_t>(tools_.size()));
    tools_.push_back({info.name, static_cast<uint32_t>(nodes_.size() - 1)});
  }
  if (tools_.empty()) {
    throw Error(forced_name.empty()
                    ? "tool_choice \"required\" needs at least one usable tool in 'tools'"
                    : "tool_choice names function '" + forced_name + "', which is not in 'tools'");
  }
  names_ = tries_.add(names);
}

uint32_t ConstraintGrammar::compile(const nlohmann::json& schema, int depth, const std::string& where) {
  if (depth > kMaxDepth) {
    throw Error("schema of '" + where + "' nests deeper than " + std::to_string(kMaxDepth) +
                " levels, more than constrained tool calls support");
  }
  if (!schema.is_object() || schema.empty()) return 0;
  SchemaNode node;
  const nlohmann::json* values = nullptr;
  nlohmann::json single;
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
    values = &*it;
  } else if (auto c = schema.find("const"); c != schema.end()) {
    single = nlohmann::json::array({*c});
    values = &single;
  }
  if (values != nullptr) {
    std::vector<std::pair<std::string, int32_t>> json_forms, raw_forms;
    for (const auto& v : *values) {
      const std::string json_text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      const std::string raw_text = v.is_string() ? v.get<std::string>() : json_text;
      if (!writable(json_text) || !writable(raw_text)) continue;
      json_forms.emplace_back(json_text, 0);
      raw_forms.emplace_back(raw_text, 0);
      node.types |= schema_types(nlohmann::json{{"const", v}});
    }
    if (json_forms.empty()) throw Error("no value of the enum of '" + where + "' can be generated");
    node.enum_json = static_cast<int32_t>(tries_.add(json_forms));
    node.enum_raw = static_cast<int32_t>(tries_.add(raw_forms));
    nodes_.push_back(std::move(node));
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  node.types = schema_types(schema);
  if (node.types == 0) return 0;
  if (node.types & kJsonObject) compile_object(node, schema, depth, where);
  if (node.types & kJsonArray) {
    auto items = schema.find("items");
    node.items = items != schema.end() ? compile(*items, depth + 1, where) : 0;
    const auto read_count = [&](const char* key, size_t fallback) {
      auto it = schema.find(key);
      return it != schema.end() && it->is_number_unsigned() ? it->get<size_t>() : fallback;
    };
    const size_t min_items = read_count("minItems", 0);
    if (min_items > 255)
      throw Error("minItems of '" + where + "' is more than constrained tool calls support");
    size_t max_items =
        std::min<size_t>(read_count("maxItems", options_.max_array_items), options_.max_array_items);
    node.min_items = static_cast<uint8_t>(min_items);
    node.max_items = static_cast<uint8_t>(std::max(max_items, min_items));
  }
  nodes_.push_back(std::move(node));
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void ConstraintGrammar::compile_object(SchemaNode& node, const nlohmann::json& schema, int depth,
                                       const std::string& where) {
  std::vector<std::pair<std::string, const nlohmann::json*>> props;
  static const nlohmann::json kAnything = nlohmann::json::object();
  if (auto it = schema.find("properties"); it != schema.end() && it->is_object()) {
    for (const auto& [key, sub] : it->items()) props.emplace_back(key, &sub);
  }
  std::vector<std::string> required;
  if (auto it = schema.find("required"); it != schema.end() && it->is_array()) {
    for (const auto& r : *it) {
      if (r.is_string()) required.push_back(r.get<std::string>());
    }
  }
  for (const std::string& r : required) {  // required but undeclared: any value will do
    if (std::none_of(props.begin(), props.end(), [&](const auto& p) { return p.first == r; })) {
      props.emplace_back(r, &kAnything);
    }
  }
  auto additional = schema.find("additionalProperties");
  if (props.empty() && !(additional != schema.end() && *additional == false)) {
    node.free_keys = true;
    return;
  }
  std::vector<std::pair<std::string, int32_t>> raw_keys, json_keys;
  for (const auto& [key, sub] : props) {
    const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
    if (!writable_key(key)) {
      if (is_required) throw Error("required parameter '" + key + "' of '" + where + "' cannot be generated");
      continue;
    }
    if (node.props.size() == 64) {
      throw Error("'" + where + "' has more than 64 properties, more than constrained tool calls support");
    }
    const auto index = static_cast<int32_t>(node.props.size());
    const uint32_t child = compile(*sub, depth + 1, where + "." + key);
    node.props.push_back(child);
    node.all_props |= uint64_t{1} << index;
    if (is_required) node.required |= uint64_t{1} << index;
    raw_keys.emplace_back(key, index);
    json_keys.emplace_back(nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                           index);
  }
  node.keys_raw = static_cast<int32_t>(tries_.add(raw_keys));
  node.keys_json = static_cast<int32_t>(tries_.add(json_keys));
}

}  // namespace spark
