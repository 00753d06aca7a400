// Key/value storage for the two kinds of attention layer, carved from one pool of equal-sized pages so a
// single byte budget covers everything:
//  - a page holds block_size positions of K and V for every full-attention layer (a "block"); a
//    sequence's full layers are a table of such blocks, shareable between sequences (refcounted) so a
//    prefix cache can hand complete blocks to a new sequence without copying. A block is
//    [layer][K, V][position][kv_dim] with f32 elements; with bf16 or fp8 ones each KV head's block_size
//    rows are contiguous instead ([layer][K, V][head][position][head_dim]). A decode step reads one head
//    at a time: with bf16 a head's row is a short piece (512 bytes on the 1.7B), and runs of a whole
//    block of them read 1.08-1.14x faster; f32 pieces are long enough already, and grouping them was
//    2-4% slower (spark-attention-bench --kv-layout, bench/RESULTS.md, session 19);
//  - sliding layers only ever look back window-1 positions, so a sequence keeps a ring of exactly
//    window-1 entries per sliding layer (laid over as few pages as hold them). The positions of the chunk
//    being computed are read from the chunk itself, and its tail is copied into the ring afterwards;
//  - a "sliding block" is block_size positions of K and V for every sliding layer, spread over
//    slide_pages_per_block() pages laid out like a full-layer block. The prefix cache keeps them so a new
//    sequence can resume at any cached block boundary: a sequence being computed writes its sliding K/V
//    into capture pages as well as its ring (see docs/prefix-cache.md).
// Elements are f32, bf16 or fp8 (FP8 E4M3, --kv-cache-dtype): bf16 pages hold the same positions in half
// the bytes and fp8 ones in a quarter, so a byte budget holds 2x or 4x the tokens; entries are returned
// untyped, elements of dtype().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "spark/model_config.h"

namespace spark {

class ThreadPool;

using kernels::KvDtype;

// "f32", "bf16" or "fp8" (alias "fp8_e4m3"; the --kv-cache-dtype values); throws on anything else.
KvDtype parse_kv_cache_dtype(const std::string& name);
using kernels::kv_dtype_name;
using kernels::kv_element_bytes;

class KvPagePool {
 public:
  // budget_bytes == 0: pages are allocated on demand without limit (command-line tools, tests).
  // Otherwise floor(budget / page) pages are reserved as one address range, so the budget is honoured to
  // within one page and never exceeded. The memory becomes resident as pages are first used (the
  // most recently freed page is handed out first, so residency follows the high-water mark of use);
  // `prefault` touches it all up front instead (no page faults under load, the budget resident from the
  // start).
  KvPagePool(const ModelConfig& config, int block_size, int64_t budget_bytes, bool prefault = false,
             KvDtype dtype = KvDtype::kF32);
  ~KvPagePool();
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  int block_size() const { return block_size_; }
  int kv_dim() const { return kv_dim_; }
  int head_dim() const { return head_dim_; }
  // Inside a full layer's block: elements between consecutive positions of one KV head, and between
  // the KV heads of one position (see the top of this file).
  bool full_heads_grouped() const { return dtype_ != KvDtype::kF32; }
  int64_t full_row_stride() const { return full_heads_grouped() ? head_dim_ : kv_dim_; }
  int64_t full_head_stride() const {
    return full_heads_grouped() ? static_cast<int64_t>(block_size_) * head_dim_ : head_dim_;
  }
  int num_full_layers() const { return num_full_layers_; }
  int num_sliding_layers() const { return num_sliding_layers_; }
  int ring_capacity() const { return ring_capacity_; }
  KvDtype dtype() const { return dtype_; }
  int element_bytes() const { return kv_element_bytes(dtype_); }
  // Elements (of dtype()) in a page.
  int64_t page_elements() const { return page_elements_; }
  int64_t page_bytes() const { return page_elements_ * element_bytes(); }
  // Pages one sequence's sliding rings occupy.
  int ring_pages() const { return ring_pages_; }
  // Bytes of KV per position for one full layer, and per ring entry for one sliding layer (K + V).
  int64_t bytes_per_token_per_layer() const { return 2 * static_cast<int64_t>(kv_dim_) * element_bytes(); }
  // Pages of one sliding block (0 for a model without sliding layers), and the K (kv 0) or V (kv 1) entry
  // of `pos` for a sliding layer inside such a block given its pages.
  int slide_pages_per_block() const { return slide_pages_per_block_; }
  void* slide_entry(const int* pages, int sliding_layer, int64_t pos, int kv);

  bool bounded() const { return max_pages_ > 0; }
  int64_t max_pages() const { return max_pages_; }
  int64_t pages_allocated() const { return static_cast<int64_t>(pages_.size()); }
  int64_t bytes_allocated() const { return pages_allocated() * page_bytes(); }
  int64_t pages_in_use() const { return in_use_; }
  int64_t pages_free() const { return bounded() ? max_pages_ - in_use_ : INT64_MAX; }

  // A free page with refcount 1, or -1 when the budget is exhausted.
  int allocate();
  void add_ref(int page) {
    int& r = refs_[static_cast<size_t>(page)];
    if (r == 1 && cached_[static_cast<size_t>(page)]) --cached_sole_;
    ++r;
  }
  void release(int page);
  int refcount(int page) const { return refs_[static_cast<size_t>(page)]; }
  // Pages the prefix cache references (marked while it does): cached_sole_pages() counts those no one
  // else holds (refcount 1), kept up to date on every reference change so reading it costs nothing.
  // The cache unmarks a page before releasing its reference.
  void set_cached(int page, bool cached);
  int64_t cached_sole_pages() const { return cached_sole_; }
  void* page(int id) { return pages_[static_cast<size_t>(id)]; }
  // Element `index` of page `id`.
  void* element(int id, int64_t index) { return pages_[static_cast<size_t>(id)] + index * element_bytes(); }

 private:
  int block_size_;
  int kv_dim_;
  int head_dim_;
  int num_full_layers_;
  int num_sliding_layers_;
  int ring_capacity_;
  KvDtype dtype_;
  int64_t page_elements_;
  int ring_pages_;
  int slide_pages_per_block_;
  int64_t max_pages_ = 0;
  int64_t in_use_ = 0;
  char* arena_ = nullptr;  // bounded pools: one anonymous mapping of arena_bytes_
  size_t arena_bytes_ = 0;
  std::vector<std::unique_ptr<float[]>> chunks_;  // unbounded pools: one allocation per page (f32-aligned)
  std::vector<char*> pages_;
  std::vector<int> refs_;
  std::vector<uint8_t> cached_;
  int64_t cached_sole_ = 0;
  std::vector<int> free_list_;
};

class SequenceKv {
 public:
  explicit SequenceKv(KvPagePool& pool);
  ~SequenceKv();
  SequenceKv(const SequenceKv&) = delete;
  SequenceKv& operator=(const SequenceKv&) = delete;

  KvPagePool& pool() { return pool_; }
  // Positions already stored (the next chunk starts here).
  int64_t num_tokens() const { return num_tokens_; }
  // Makes room for positions up to total_tokens - 1 (and the rings, on first use); false if the pool
  // ran out, in which case the sequence keeps what it had.
  bool reserve(int64_t total_tokens);
  // Pages reserve(total_tokens) would still need to allocate.
  int64_t pages_needed(int64_t total_tokens) const;
  int64_t reserved_tokens() const { return static_cast<int64_t>(blocks_.size()) * pool_.block_size(); }
  // Called by the forward pass once a chunk's K/V are stored.
  void advance(int64_t n) { num_tokens_ += n; }
  // Frees every page and forgets all positions.
  void clear();

  // Adopts a cached prefix of blocks.size() complete blocks: shares the blocks (one reference each) and
  // fills the rings from the sliding blocks covering the last window-1 positions before it
  // (slide[b] is the pages of block b's sliding block; only those blocks are read). The sequence must
  // be empty. False (sequence left empty) if the pool cannot supply the ring pages. With `threads`, the
  // ring fill (window-1 positions of every sliding layer: 42 MiB on the 1.7B in f32) is split over them.
  bool adopt_prefix(const std::vector<int>& blocks, const std::vector<const int*>& slide,
                    ThreadPool* threads = nullptr);

  // Capture: while block `block` is computed, its sliding-layer K/V are also written to `pages` (a
  // sliding block, owned by the sequence until taken). take_capture hands them over (empty if none).
  void set_capture(int64_t block, std::vector<int> pages);
  bool capturing(int64_t block) const {
    return block < static_cast<int64_t>(capture_.size()) && !capture_[static_cast<size_t>(block)].empty();
  }
  std::vector<int> take_capture(int64_t block);
  // The capture entry of `pos` for a sliding layer, or nullptr when its block is not being captured.
  // Entries are kv_dim elements of the pool's dtype().
  void* capture_keys(int sliding_layer, int64_t pos) { return capture_entry(sliding_layer, pos, 0); }
  void* capture_values(int sliding_layer, int64_t pos) { return capture_entry(sliding_layer, pos, 1); }

  int ring_capacity() const { return pool_.ring_capacity(); }
  // Full layers: head 0 of position `pos`; head h is pool().full_head_stride() elements further.
  // Rings and captures: whole rows of kv_dim elements.
  void* full_keys(int full_layer, int64_t pos) { return full_entry(full_layer, pos, 0); }
  void* full_values(int full_layer, int64_t pos) { return full_entry(full_layer, pos, 1); }
  void* ring_keys(int sliding_layer, int64_t pos) { return ring_entry(sliding_layer, pos, 0); }
  void* ring_values(int sliding_layer, int64_t pos) { return ring_entry(sliding_layer, pos, 1); }

  const std::vector<int>& blocks() const { return blocks_; }
  const std::vector<int>& ring() const { return ring_; }
  int64_t pages_held() const;
  // Bytes the sliding rings hold: exactly window-1 entries per sliding layer (the last page may have room
  // to spare, which ring_bytes_reserved counts).
  int64_t ring_bytes() const;
  int64_t ring_bytes_reserved() const { return static_cast<int64_t>(ring_.size()) * pool_.page_bytes(); }

 private:
  void* full_entry(int full_layer, int64_t pos, int kv);
  void* ring_entry(int sliding_layer, int64_t pos, int kv);
  void* capture_entry(int sliding_layer, int64_t pos, int kv);
  bool ensure_ring();

  KvPagePool& pool_;
  int64_t num_tokens_ = 0;
  std::vector<int> blocks_;
  std::vector<int> ring_;
  std::vector<std::vector<int>> capture_;  // by block index; empty: not captured
};

}  // namespace spark
