#include "server/tool_call_constraint_vocab.h"

#include <algorithm>
#include <string_view>

#include "spark/error.h"

namespace spark {

TokenTrie::TokenTrie(const std::vector<std::string>& texts, const std::vector<int32_t>& ids) {
  std::vector<int32_t> sorted;
  for (int32_t id : ids) {
    if (!texts[static_cast<size_t>(id)].empty()) sorted.push_back(id);
  }
  // std::string orders bytes as unsigned char, so children are created in byte order.
  std::stable_sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) { return texts[a] < texts[b]; });

  struct Edge {
    uint32_t parent;
    uint8_t byte;
    uint32_t child;
  };
  std::vector<Edge> edges;
  std::vector<std::pair<uint32_t, int32_t>> ends;  // (node, token)
  std::vector<uint32_t> path{kRoot};
  uint32_t nodes = 1;
  std::string_view previous;
  for (int32_t id : sorted) {
    const std::string_view text = texts[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < text.size() && common < previous.size() && text[common] == previous[common]) ++common;
    path.resize(common + 1);
    for (size_t i = common; i < text.size(); ++i) {
      edges.push_back({path.back(), static_cast<uint8_t>(text[i]), nodes});
      path.push_back(nodes++);
    }
    ends.emplace_back(path.back(), id);
    max_depth_ = std::max(max_depth_, text.size());
    previous = text;
  }
  // Edges were made parent by parent in byte order; grouping them by parent (stably) keeps that order.
  edge_offset_.assign(nodes + 1, 0);
  for (const Edge& e : edges) ++edge_offset_[e.parent + 1];
  for (uint32_t n = 0; n < nodes; ++n) edge_offset_[n + 1] += edge_offset_[n];
  edge_byte_.resize(edges.size());
  edge_child_.resize(edges.size());
  std::vector<uint32_t> fill(edge_offset_.begin(), edge_offset_.end() - 1);
  for (const Edge& e : edges) {
    const uint32_t at = fill[e.parent]++;
    edge_byte_[at] = e.byte;
    edge_child_[at] = e.child;
  }
  token_offset_.assign(nodes + 1, 0);
  for (const auto& [node, id] : ends) ++token_offset_[node + 1];
  for (uint32_t n = 0; n < nodes; ++n) token_offset_[n + 1] += token_offset_[n];
  tokens_.resize(ends.size());
  std::vector<uint32_t> token_fill(token_offset_.begin(), token_offset_.end() - 1);
  for (const auto& [node, id] : ends) tokens_[token_fill[node]++] = id;
}

namespace {

// Offset of the last character when `text` is whole, well-formed UTF-8 characters none of which is
// rejected by `bad`; kIrregular otherwise.
template <typename Bad>
uint16_t plain_class(std::string_view text, Bad bad) {
  size_t last = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<uint8_t>(text[i]);
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      if (bad(c)) return ConstraintVocab::kIrregular;
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return ConstraintVocab::kIrregular;
    }
    if (i + len > text.size()) return ConstraintVocab::kIrregular;
    for (size_t k = 1; k < len; ++k) {
      const auto cont = static_cast<uint8_t>(text[i + k]);
      if (cont < (k == 1 ? lo : 0x80) || cont > (k == 1 ? hi : 0xBF)) return ConstraintVocab::kIrregular;
    }
    last = i;
    i += len;
  }
  if (text.empty() || last >= ConstraintVocab::kIrregular) return ConstraintVocab::kIrregular;
  return static_cast<uint16_t>(last);
}

}  // namespace

ConstraintVocab::ConstraintVocab(std::vector<std::string> token_texts, std::vector<int32_t> end_ids)
    : texts_(std::move(token_texts)), end_ids_(std::move(end_ids)), is_end_(texts_.size(), 0) {
  for (int32_t id : end_ids_) {
    if (id < 0 || static_cast<size_t>(id) >= texts_.size())
      throw Error("end-of-sequence token id out of range");
    is_end_[static_cast<size_t>(id)] = 1;
  }
  raw_plain_.assign(texts_.size(), kIrregular);
  json_plain_.assign(texts_.size(), kIrregular);
  std::vector<int32_t> all, raw_irregular, json_irregular;
  for (size_t i = 0; i < texts_.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (is_end_[i] || texts_[i].empty()) continue;
    all.push_back(id);
    raw_plain_[i] = plain_class(texts_[i], [](uint8_t c) { return c == '<'; });
    json_plain_[i] =
        plain_class(texts_[i], [](uint8_t c) { return c == '<' || c == '"' || c == '\\' || c < 0x20; });
    if (raw_plain_[i] == kIrregular) raw_irregular.push_back(id);
    if (json_plain_[i] == kIrregular) json_irregular.push_back(id);
  }
  all_ = TokenTrie(texts_, all);
  raw_irregular_ = TokenTrie(texts_, raw_irregular);
  json_irregular_ = TokenTrie(texts_, json_irregular);
}

}  // namespace spark
