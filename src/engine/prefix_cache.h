// Block-granular prefix cache (docs/prefix-cache.md). A node is one complete block of block_size tokens,
// keyed by a chained hash of (parent block's hash, the block's tokens), so the longest cached prefix of a
// prompt is found in one probe per block. A node holds a reference to the block's full-layer page (shared
// with every sequence that uses it, never copied) and, optionally, its sliding block: the sliding-layer
// K/V of the same positions, which a sequence needs for the window-1 positions before where it resumes.
// Everything lives in the engine's one page pool. Under pressure the cache first drops sliding blocks
// that no leaf or branch point can resume from, then evicts least-recently-used leaves whose full page no
// sequence holds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/kv_cache.h"

namespace spark {

class PrefixCache {
 public:
  static constexpr uint64_t kRootHash = 0xcbf29ce484222325ULL;

  // What a prompt can reuse: `tokens` = blocks * block_size positions.
  struct Match {
    int64_t tokens = 0;
    uint64_t last_hash = kRootHash;  // chain hash of the last reused block (kRootHash: none)
    std::vector<int> full_pages;     // one per reused block
    std::vector<const int*> slide;   // per reused block: its sliding block's pages, where needed
  };

  explicit PrefixCache(KvPagePool& pool);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest block-aligned prefix of `tokens`, at most max_len long, whose full blocks are cached and
  // whose sliding blocks cover the window-1 positions before its end. Marks those blocks used.
  Match lookup(std::span<const int32_t> tokens, int64_t max_len);
  // Adds the block of `tokens` (block_size of them) after the block hashed parent_hash (kRootHash: the
  // first block). Takes a reference to full_page and ownership of `slide` (a sliding block, or empty);
  // when the block is already cached, `slide` fills a missing sliding block or is released. Returns the
  // block's chain hash, or nullopt when the parent is not cached or the hash belongs to other tokens.
  std::optional<uint64_t> insert(uint64_t parent_hash, std::span<const int32_t> tokens, int full_page,
                                 std::vector<int> slide);
  // Frees cache-only pages until the pool has `free_pages` free or nothing more can go; pages freed.
  int64_t evict(int64_t free_pages) { return evict_until(false, free_pages); }
  // Evicts everything that no sequence holds.
  int64_t clear() { return evict_until(true, 0); }

  int64_t blocks() const { return static_cast<int64_t>(nodes_.size()); }
  int64_t sliding_blocks() const { return slide_blocks_; }
  // Pages that only the cache holds (what evicting everything would free). A counter the pool keeps as
  // references change (KvPagePool::cached_sole_pages), not a walk over the blocks: read every step.
  int64_t pages_held_exclusively() const { return pool_.cached_sole_pages(); }
  int64_t evicted_blocks() const { return evicted_blocks_; }
  int64_t evicted_sliding_blocks() const { return evicted_sliding_; }

  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);

 private:
  struct Node {
    uint64_t hash = 0;
    Node* parent = nullptr;
    int64_t depth = 0;  // block index in the sequence
    std::vector<int32_t> tokens;
    int full_page = -1;
    std::vector<int> slide;  // empty: not cached (never captured, or dropped)
    std::vector<Node*> children;
    uint64_t last_used = 0;
  };

  int64_t evict_until(bool all, int64_t free_pages);
  void drop_slide(Node& n);
  // Takes the cache's reference to a sliding block's pages / gives one page's reference back.
  void hold_slide(Node& n, std::vector<int> slide);
  void unhold(int page);
  void erase_leaf(Node* n);

  KvPagePool& pool_;
  int64_t window_blocks_;  // blocks that can hold one of the window-1 positions before a block boundary
  std::unordered_map<uint64_t, std::unique_ptr<Node>> nodes_;
  uint64_t tick_ = 0;
  int64_t evicted_blocks_ = 0;
  int64_t evicted_sliding_ = 0;
  int64_t slide_blocks_ = 0;
};

}  // namespace spark
