// Prefix cache for agent sessions, which resend the whole conversation every turn. An entry is the KV
// state of a token prefix at an exact position: the full-layer blocks (shared by reference) and a copy
// of the sliding-layer rings taken at that position. The rings are what make a hit skip the prefix
// entirely: sliding layers cannot be rebuilt from full-layer blocks. Entries live in the same page pool
// as running sequences and are evicted least-recently-used when sequences need the pages.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "model/kv_cache.h"

namespace spark {

class PrefixCache {
 public:
  struct Entry {
    std::vector<int32_t> tokens;
    uint64_t hash = 0;
    std::vector<int> blocks;  // one reference held per block
    std::vector<int> ring;    // owned ring pages (a snapshot at tokens.size())
  };

  explicit PrefixCache(KvPagePool& pool) : pool_(pool) {}
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest entry whose tokens are a prefix of `tokens` and no longer than max_len, marked most
  // recently used; nullptr when none matches.
  const Entry* lookup(std::span<const int32_t> tokens, int64_t max_len);
  // Adds an entry for tokens (the sequence's first tokens.size() positions): takes a reference to the
  // covering blocks and ownership of `ring`. An identical entry is refreshed instead (ring released).
  void insert(std::vector<int32_t> tokens, const std::vector<int>& blocks, std::vector<int> ring);
  // Drops the least recently used entry; false when empty.
  bool evict_one();
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  int64_t pages_held_exclusively() const;
  // Distinct pages the entries reference: with no sequence running, every page in use.
  int64_t pages_held() const;

 private:
  void release(Entry& e);

  KvPagePool& pool_;
  std::list<Entry> entries_;  // front: most recently used
};

uint64_t hash_tokens(std::span<const int32_t> tokens);

}  // namespace spark
