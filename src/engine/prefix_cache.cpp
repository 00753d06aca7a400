#include "engine/prefix_cache.h"

#include <algorithm>
#include <queue>

#include "spark/error.h"

namespace spark {

namespace {

constexpr uint64_t kHashMul = 0x100000001b3ULL;

// First block whose positions include one of the window-1 positions before block boundary d.
int64_t first_needed_block(int64_t d, int64_t block_size, int64_t ring_capacity) {
  return std::max<int64_t>(0, d * block_size - ring_capacity) / block_size;
}

}  // namespace

uint64_t PrefixCache::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent's hash and the tokens, then a final mix so chained values spread evenly.
  uint64_t h = kRootHash;
  for (int i = 0; i < 8; ++i) h = (h ^ ((parent >> (8 * i)) & 0xff)) * kHashMul;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * kHashMul;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h == kRootHash ? h + 1 : h;
}

PrefixCache::PrefixCache(KvPagePool& pool)
    : pool_(pool),
      window_blocks_(static_cast<int>((static_cast<int64_t>(pool.ring_capacity()) + pool.block_size() - 1) /
                                      pool.block_size())) {}

PrefixCache::~PrefixCache() {
  for (auto& [h, n] : nodes_) {
    unhold(n->full_page);
    for (int p : n->slide) unhold(p);
  }
}

void PrefixCache::hold_slide(Node& n, std::vector<int> slide) {
  n.slide = std::move(slide);
  for (int p : n.slide) pool_.set_cached(p, true);
  if (!n.slide.empty()) ++slide_blocks_;
}

void PrefixCache::unhold(int page) {
  pool_.set_cached(page, false);
  pool_.release(page);
}

PrefixCache::Match PrefixCache::lookup(std::span<const int32_t> tokens, int64_t max_len) {
  const int64_t bs = pool_.block_size();
  const int64_t limit = std::min<int64_t>(max_len, static_cast<int64_t>(tokens.size())) / bs;
  std::vector<Node*> path;
  uint64_t h = kRootHash;
  Node* parent = nullptr;
  for (int64_t b = 0; b < limit; ++b) {
    std::span<const int32_t> block = tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs));
    h = chain_hash(h, block);
    auto it = nodes_.find(h);
    if (it == nodes_.end()) break;
    Node* n = it->second.get();
    if (n->parent != parent || !std::equal(block.begin(), block.end(), n->tokens.begin())) break;
    path.push_back(n);
    parent = n;
  }
  // The deepest boundary whose window is fully covered by cached sliding blocks.
  const bool needs_slide = pool_.num_sliding_layers() > 0 && pool_.ring_capacity() > 0;
  int64_t last_missing = -1;  // last block index < d without a sliding block
  int64_t best = 0;
  for (int64_t d = 1; d <= static_cast<int64_t>(path.size()); ++d) {
    if (path[static_cast<size_t>(d - 1)]->slide.empty()) last_missing = d - 1;
    if (!needs_slide || last_missing < first_needed_block(d, bs, pool_.ring_capacity())) best = d;
  }
  Match m;
  if (best == 0) return m;
  ++tick_;
  const int64_t first = first_needed_block(best, bs, pool_.ring_capacity());
  for (int64_t b = 0; b < best; ++b) {
    Node* n = path[static_cast<size_t>(b)];
    n->last_used = tick_;
    m.full_pages.push_back(n->full_page);
    m.slide.push_back(b >= first && !n->slide.empty() ? n->slide.data() : nullptr);
  }
  m.tokens = best * bs;
  m.last_hash = path[static_cast<size_t>(best - 1)]->hash;
  return m;
}

std::optional<uint64_t> PrefixCache::insert(uint64_t parent_hash, std::span<const int32_t> tokens,
                                            int full_page, std::vector<int> slide) {
  if (static_cast<int64_t>(tokens.size()) != pool_.block_size())
    throw Error("PrefixCache::insert: not one block");
  auto release_slide = [&] {
    for (int p : slide) pool_.release(p);
  };
  Node* parent = nullptr;
  if (parent_hash != kRootHash) {
    auto it = nodes_.find(parent_hash);
    if (it == nodes_.end()) {
      release_slide();
      return std::nullopt;
    }
    parent = it->second.get();
  }
  const uint64_t h = chain_hash(parent_hash, tokens);
  ++tick_;
  auto it = nodes_.find(h);
  if (it != nodes_.end()) {
    Node* n = it->second.get();
    if (n->parent != parent || !std::equal(tokens.begin(), tokens.end(), n->tokens.begin())) {
      release_slide();  // a 64-bit collision: leave the cached block alone
      return std::nullopt;
    }
    if (n->slide.empty()) {
      hold_slide(*n, std::move(slide));
    } else {
      release_slide();
    }
    n->last_used = tick_;
    return h;
  }
  auto n = std::make_unique<Node>();
  n->hash = h;
  n->parent = parent;
  n->depth = parent ? parent->depth + 1 : 0;
  n->tokens.assign(tokens.begin(), tokens.end());
  n->full_page = full_page;
  pool_.add_ref(full_page);
  pool_.set_cached(full_page, true);
  hold_slide(*n, std::move(slide));
  n->last_used = tick_;
  if (parent) parent->children.push_back(n.get());
  nodes_.emplace(h, std::move(n));
  return h;
}

void PrefixCache::drop_slide(Node& n) {
  for (int p : n.slide) unhold(p);
  if (!n.slide.empty()) --slide_blocks_;
  n.slide.clear();
  ++evicted_sliding_;
}

void PrefixCache::erase_leaf(Node* n) {
  if (n->parent) {
    auto& c = n->parent->children;
    c.erase(std::find(c.begin(), c.end(), n));
  }
  unhold(n->full_page);
  for (int p : n->slide) unhold(p);
  if (!n->slide.empty()) --slide_blocks_;
  ++evicted_blocks_;
  nodes_.erase(n->hash);
}

int64_t PrefixCache::evict_until(bool all, int64_t free_pages) {
  const int64_t before = pool_.pages_in_use();
  auto enough = [&] { return !all && pool_.pages_free() >= free_pages; };
  if (enough() || nodes_.empty()) return 0;

  // 1. Sliding blocks no resume point needs. Resuming is only likely where a leaf ends (the next turn
  //    of a conversation) or a branch point (where earlier prompts diverged: a shared system prompt), so
  //    a sliding block is kept while it lies inside the window before the nearest such node below it.
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  for (auto& [h, n] : nodes_) order.push_back(n.get());
  std::sort(order.begin(), order.end(), [](const Node* a, const Node* b) { return a->depth > b->depth; });
  std::unordered_map<const Node*, int64_t> anchor;  // depth of the nearest leaf or branch point below
  std::vector<Node*> spare;
  for (Node* n : order) {
    const int64_t a = n->children.size() == 1 ? anchor[n->children[0]] : n->depth;
    anchor[n] = a;
    if (!n->slide.empty() &&
        (all || n->depth < first_needed_block(a + 1, pool_.block_size(), pool_.ring_capacity())))
      spare.push_back(n);
  }
  std::sort(spare.begin(), spare.end(),
            [](const Node* a, const Node* b) { return a->last_used < b->last_used; });
  for (Node* n : spare) {
    if (enough()) break;
    drop_slide(*n);
  }

  // 2. Least-recently-used leaves that no sequence holds; a parent left childless becomes a leaf.
  auto evictable = [&](const Node* n) { return n->children.empty() && pool_.refcount(n->full_page) == 1; };
  auto older = [](const Node* a, const Node* b) { return a->last_used > b->last_used; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> leaves(older);
  for (Node* n : order) {
    if (evictable(n)) leaves.push(n);
  }
  while (!enough() && !leaves.empty()) {
    Node* n = leaves.top();
    leaves.pop();
    Node* parent = n->parent;
    erase_leaf(n);
    if (parent && evictable(parent)) leaves.push(parent);
  }
  return before - pool_.pages_in_use();
}

}  // namespace spark
