#include "server/tool_call_constraint.h"

#include <algorithm>

#include "spark/error.h"

namespace spark {

ToolCallConstraint::ToolCallConstraint(std::shared_ptr<const ConstraintVocab> vocab,
                                       const nlohmann::json& tools, const std::string& forced_name,
                                       ToolCallConstraintOptions options)
    : vocab_(std::move(vocab)), grammar_(tools, forced_name, options) {
  if (!vocab_) throw Error("tool-call constraint needs a vocabulary");
}

size_t ToolCallConstraint::allowed_tokens(std::vector<uint8_t>& mask) const {
  const ConstraintVocab& vocab = *vocab_;
  mask.assign(vocab.size(), 0);
  if (ended_) return 0;
  if (complete()) {
    for (int32_t id : vocab.end_ids()) mask[static_cast<size_t>(id)] = 1;
    return vocab.end_ids().size();
  }
  const bool raw = state_.in_raw_text();
  if (raw || state_.in_json_text()) {
    // Inside a string nearly every token is allowed and only lengthens it: decide plain tokens by length in
    // one pass, and walk only the irregular ones (partial characters, `<`, quotes, escapes).
    const std::vector<uint16_t>& plain = raw ? vocab.raw_plain() : vocab.json_plain();
    const size_t max = grammar_.options().max_string_bytes;
    const auto room =
        static_cast<uint16_t>(max > state_.str_len ? std::min<size_t>(max - state_.str_len, 0xFFFF) : 0);
    uint8_t* m = mask.data();
    const uint16_t* p = plain.data();
    for (size_t i = 0, n = plain.size(); i < n; ++i) m[i] = p[i] < room;
    walk(raw ? vocab.raw_irregular() : vocab.json_irregular(), mask.data());
  } else {
    walk(vocab.all(), mask.data());
  }
  size_t count = 0;
  for (const uint8_t m : mask) count += m;
  return count;
}

void ToolCallConstraint::walk(const TokenTrie& trie, uint8_t* mask) const {
  const size_t levels = trie.max_depth() + 1;
  if (scratch_.size() < levels) {
    scratch_.resize(levels);
    edge_at_.resize(levels);
    edge_end_.resize(levels);
  }
  if (trie.node_count() == 0) return;
  // Depth-first over the trie, one automaton state per depth: a rejected byte prunes its whole subtree.
  scratch_[0] = state_;
  edge_at_[0] = trie.edges_begin(TokenTrie::kRoot);
  edge_end_[0] = trie.edges_end(TokenTrie::kRoot);
  size_t depth = 0;
  for (;;) {
    if (edge_at_[depth] == edge_end_[depth]) {
      if (depth == 0) break;
      --depth;
      continue;
    }
    const uint32_t edge = edge_at_[depth]++;
    ConstraintState& next = scratch_[depth + 1];
    next = scratch_[depth];
    if (!next.advance(grammar_, trie.edge_byte(edge))) continue;
    const uint32_t child = trie.edge_child(edge);
    for (uint32_t t = trie.tokens_begin(child); t < trie.tokens_end(child); ++t) {
      mask[static_cast<size_t>(trie.token(t))] = 1;
    }
    if (trie.edges_begin(child) != trie.edges_end(child)) {
      ++depth;
      edge_at_[depth] = trie.edges_begin(child);
      edge_end_[depth] = trie.edges_end(child);
    }
  }
}

bool ToolCallConstraint::allows(int32_t token) const {
  if (ended_ || token < 0 || static_cast<size_t>(token) >= vocab_->size()) return false;
  if (vocab_->is_end(token)) return complete();
  const std::string& text = vocab_->text(token);
  if (text.empty()) return false;
  ConstraintState s = state_;
  for (const char c : text) {
    if (!s.advance(grammar_, static_cast<uint8_t>(c))) return false;
  }
  return true;
}

void ToolCallConstraint::accept(int32_t token) {
  if (!allows(token)) {
    throw Error("token " + std::to_string(token) + " does not continue the constrained tool call");
  }
  if (vocab_->is_end(token)) {
    ended_ = true;
    return;
  }
  for (const char c : vocab_->text(token)) state_.advance(grammar_, static_cast<uint8_t>(c));
}

}  // namespace spark
