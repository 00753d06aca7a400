#include "engine/prefix_cache.h"

#include <algorithm>
#include <unordered_set>

namespace spark {

namespace {

constexpr uint64_t kHashMul = 0x100000001b3ULL;
constexpr uint64_t kHashInit = 0xcbf29ce484222325ULL;

inline uint64_t hash_step(uint64_t h, int32_t t) {
  return (h ^ static_cast<uint32_t>(t)) * kHashMul;
}

}  // namespace

uint64_t hash_tokens(std::span<const int32_t> tokens) {
  uint64_t h = kHashInit;
  for (int32_t t : tokens) h = hash_step(h, t);
  return h;
}

PrefixCache::~PrefixCache() {
  for (Entry& e : entries_) release(e);
}

void PrefixCache::release(Entry& e) {
  for (int b : e.blocks) pool_.release(b);
  for (int p : e.ring) pool_.release(p);
  e.blocks.clear();
  e.ring.clear();
}

const PrefixCache::Entry* PrefixCache::lookup(std::span<const int32_t> tokens, int64_t max_len) {
  // Prefix hashes of the request, one per length, so each entry is checked in O(1) before its tokens
  // are compared.
  const size_t n = static_cast<size_t>(std::min<int64_t>(max_len, static_cast<int64_t>(tokens.size())));
  std::vector<uint64_t> prefix_hash(n + 1);
  prefix_hash[0] = kHashInit;
  for (size_t i = 0; i < n; ++i) prefix_hash[i + 1] = hash_step(prefix_hash[i], tokens[i]);
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const size_t len = it->tokens.size();
    if (len == 0 || len > n || prefix_hash[len] != it->hash) continue;
    if (best != entries_.end() && best->tokens.size() >= len) continue;
    if (std::equal(it->tokens.begin(), it->tokens.end(), tokens.begin())) best = it;
  }
  if (best == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, best);
  return &entries_.front();
}

void PrefixCache::insert(std::vector<int32_t> tokens, const std::vector<int>& blocks, std::vector<int> ring) {
  const uint64_t h = hash_tokens(tokens);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->hash == h && it->tokens == tokens) {
      for (int p : ring) pool_.release(p);
      entries_.splice(entries_.begin(), entries_, it);
      return;
    }
  }
  Entry e;
  e.hash = h;
  const size_t covering =
      (tokens.size() + static_cast<size_t>(pool_.block_size()) - 1) / static_cast<size_t>(pool_.block_size());
  for (size_t i = 0; i < covering && i < blocks.size(); ++i) {
    pool_.add_ref(blocks[i]);
    e.blocks.push_back(blocks[i]);
  }
  e.tokens = std::move(tokens);
  e.ring = std::move(ring);
  entries_.push_front(std::move(e));
}

bool PrefixCache::evict_one() {
  if (entries_.empty()) return false;
  release(entries_.back());
  entries_.pop_back();
  return true;
}

int64_t PrefixCache::pages_held() const {
  std::unordered_set<int> pages;
  for (const Entry& e : entries_) {
    pages.insert(e.ring.begin(), e.ring.end());
    pages.insert(e.blocks.begin(), e.blocks.end());
  }
  return static_cast<int64_t>(pages.size());
}

int64_t PrefixCache::pages_held_exclusively() const {
  int64_t n = 0;
  for (const Entry& e : entries_) {
    n += static_cast<int64_t>(e.ring.size());
    for (int b : e.blocks) n += pool_.refcount(b) == 1 ? 1 : 0;
  }
  return n;
}

}  // namespace spark
