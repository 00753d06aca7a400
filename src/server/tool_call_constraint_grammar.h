// The request's allowed tools compiled for constrained decoding: small byte tries for tool names, parameter
// names and enum values, and one node per JSON-schema position that says which values may appear there.
// Everything is bounded (string lengths, array sizes, nesting) so that generation always terminates.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace spark {

struct ToolCallConstraintOptions {
  size_t max_string_bytes = 64;  // a string value starts no new character past this many bytes
  uint8_t max_array_items = 8;   // unless the schema's minItems asks for more
  uint8_t max_free_members = 4;  // members of an object the schema leaves free
  uint8_t max_free_depth = 3;    // nesting of values the schema leaves free
};

// Byte tries packed in one pool; each trie is named by its root node. Terminal nodes carry a value (tool,
// property or enum index); `subtree` ORs 1 << value over the terminals below a node (values < 64), which
// lets a walk skip parameter names that were already used.
class TriePool {
 public:
  static constexpr int32_t kNone = -1;

  uint32_t add(const std::vector<std::pair<std::string, int32_t>>& entries);

  int32_t child(uint32_t node, uint8_t byte) const {
    const Node& n = nodes_[node];
    for (uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
      if (edge_byte_[e] == byte) return static_cast<int32_t>(edge_child_[e]);
    }
    return kNone;
  }
  int32_t terminal(uint32_t node) const { return nodes_[node].terminal; }
  bool has_children(uint32_t node) const { return nodes_[node].edge_count > 0; }
  uint64_t subtree(uint32_t node) const { return nodes_[node].subtree; }

 private:
  struct Node {
    uint32_t first_edge = 0;
    uint32_t edge_count = 0;
    int32_t terminal = kNone;
    uint64_t subtree = 0;
  };
  std::vector<Node> nodes_;
  std::vector<uint8_t> edge_byte_;
  std::vector<uint32_t> edge_child_;
};

// What may appear at one position of the arguments. Node 0 is the free node: any JSON value, within the
// option bounds.
struct SchemaNode {
  uint8_t types = 0;  // JsonTypeBit set
  bool free = false;
  int32_t enum_json = TriePool::kNone;  // the enum values as JSON texts
  int32_t enum_raw = TriePool::kNone;   // ... as `<arg_value>` texts (strings unquoted)
  // Objects: keyed by declared properties (keys_json / keys_raw, terminal = property index), or free keys.
  bool free_keys = false;
  int32_t keys_json = TriePool::kNone;  // `"name"` texts
  int32_t keys_raw = TriePool::kNone;   // bare names, for the tool's own parameters
  std::vector<uint32_t> props;
  uint64_t all_props = 0;
  uint64_t required = 0;
  // Arrays.
  uint32_t items = 0;
  uint8_t min_items = 0;
  uint8_t max_items = 0;
};

struct ToolGrammar {
  std::string name;
  uint32_t params = 0;  // an object node; its keys_raw names the parameters
};

class ConstraintGrammar {
 public:
  static constexpr uint8_t kMaxDepth = 8;  // JSON containers open at once

  // `tools`: the request's OpenAI tools array; `forced_name`: the tool tool_choice names, or empty for any
  // of them ("required"). Throws spark::Error when no tool can be called or a schema cannot be honoured
  // (more than 64 properties, deeper than kMaxDepth, a required name that cannot be written).
  ConstraintGrammar(const nlohmann::json& tools, const std::string& forced_name,
                    ToolCallConstraintOptions options);

  const TriePool& tries() const { return tries_; }
  const SchemaNode& node(uint32_t index) const { return nodes_[index]; }
  const ToolGrammar& tool(uint32_t index) const { return tools_[index]; }
  uint32_t names() const { return names_; }
  const ToolCallConstraintOptions& options() const { return options_; }

 private:
  uint32_t compile(const nlohmann::json& schema, int depth, const std::string& where);
  void compile_object(SchemaNode& node, const nlohmann::json& schema, int depth, const std::string& where);

  ToolCallConstraintOptions options_;
  TriePool tries_;
  std::vector<SchemaNode> nodes_;
  std::vector<ToolGrammar> tools_;
  uint32_t names_ = 0;
};

}  // namespace spark
