#include "model/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "spark/error.h"

namespace spark {

KvPagePool::KvPagePool(const ModelConfig& config, int block_size, int64_t budget_bytes, bool prefault)
    : block_size_(block_size),
      kv_dim_(config.kv_dim()),
      num_full_layers_(config.num_full_layers()),
      num_sliding_layers_(config.num_sliding_layers()),
      ring_capacity_(config.sliding_window - 1) {
  if (block_size <= 0) throw Error("KV block size must be positive");
  // A page is one block of the full layers; a model without full layers still pages its rings.
  page_floats_ = 2 * static_cast<int64_t>(std::max(1, num_full_layers_)) * block_size * kv_dim_;
  const int64_t ring_floats = 2 * static_cast<int64_t>(num_sliding_layers_) * ring_capacity_ * kv_dim_;
  ring_pages_ = static_cast<int>((ring_floats + page_floats_ - 1) / page_floats_);
  if (budget_bytes > 0) {
    max_pages_ = budget_bytes / page_bytes();
    if (max_pages_ == 0) {
      throw Error("KV cache budget of " + std::to_string(budget_bytes) + " bytes is smaller than one page (" +
                  std::to_string(page_bytes()) + " bytes)");
    }
    // An anonymous mapping reads as zeros and commits memory page by page as it is written.
    arena_bytes_ = static_cast<size_t>(max_pages_ * page_bytes());
    void* mem = ::mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
      throw Error("cannot reserve a KV cache of " + std::to_string(arena_bytes_) +
                  " bytes: " + std::strerror(errno));
    }
    arena_ = static_cast<float*>(mem);
    if (prefault) std::memset(arena_, 0, arena_bytes_);
    for (int64_t p = 0; p < max_pages_; ++p) pages_.push_back(arena_ + p * page_floats_);
    refs_.assign(pages_.size(), 0);
    for (int64_t p = max_pages_ - 1; p >= 0; --p) free_list_.push_back(static_cast<int>(p));
  }
}

KvPagePool::~KvPagePool() {
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
}

int KvPagePool::allocate() {
  if (free_list_.empty()) {
    if (bounded()) return -1;
    chunks_.emplace_back(new float[static_cast<size_t>(page_floats_)]);
    pages_.push_back(chunks_.back().get());
    refs_.push_back(0);
    free_list_.push_back(static_cast<int>(pages_.size() - 1));
  }
  int p = free_list_.back();
  free_list_.pop_back();
  refs_[static_cast<size_t>(p)] = 1;
  ++in_use_;
  return p;
}

void KvPagePool::release(int page) {
  int& r = refs_[static_cast<size_t>(page)];
  if (r <= 0) throw Error("KV page released more often than referenced");
  if (--r == 0) {
    free_list_.push_back(page);
    --in_use_;
  }
}

SequenceKv::SequenceKv(KvPagePool& pool) : pool_(pool) {}

SequenceKv::~SequenceKv() {
  clear();
}

int64_t SequenceKv::pages_needed(int64_t total_tokens) const {
  const int64_t blocks = (total_tokens + pool_.block_size() - 1) / pool_.block_size();
  int64_t need = std::max<int64_t>(0, blocks - static_cast<int64_t>(blocks_.size()));
  if (ring_.empty()) need += pool_.ring_pages();
  return need;
}

bool SequenceKv::ensure_ring() {
  if (!ring_.empty() || pool_.ring_pages() == 0) return true;
  for (int i = 0; i < pool_.ring_pages(); ++i) {
    int p = pool_.allocate();
    if (p < 0) {
      for (int q : ring_) pool_.release(q);
      ring_.clear();
      return false;
    }
    ring_.push_back(p);
  }
  return true;
}

bool SequenceKv::reserve(int64_t total_tokens) {
  const bool had_ring = !ring_.empty();
  if (!ensure_ring()) return false;
  const int64_t need = (total_tokens + pool_.block_size() - 1) / pool_.block_size();
  const size_t before = blocks_.size();
  while (static_cast<int64_t>(blocks_.size()) < need) {
    int b = pool_.allocate();
    if (b < 0) {
      while (blocks_.size() > before) {
        pool_.release(blocks_.back());
        blocks_.pop_back();
      }
      if (!had_ring) {
        for (int q : ring_) pool_.release(q);
        ring_.clear();
      }
      return false;
    }
    blocks_.push_back(b);
  }
  return true;
}

void SequenceKv::clear() {
  for (int b : blocks_) pool_.release(b);
  for (int p : ring_) pool_.release(p);
  blocks_.clear();
  ring_.clear();
  num_tokens_ = 0;
}

bool SequenceKv::adopt_prefix(const std::vector<int>& blocks, const std::vector<int>& ring_snapshot,
                              int64_t num_tokens) {
  if (num_tokens_ != 0 || !blocks_.empty()) throw Error("adopt_prefix needs an empty sequence");
  const int bs = pool_.block_size();
  const size_t complete = static_cast<size_t>(num_tokens / bs);
  const bool partial = num_tokens % bs != 0;
  if (blocks.size() < complete + (partial ? 1 : 0))
    throw Error("adopt_prefix: cached blocks do not cover the prefix");
  for (size_t i = 0; i < complete; ++i) {
    pool_.add_ref(blocks[i]);
    blocks_.push_back(blocks[i]);
  }
  // A partial block will be written past the prefix, so it is copied rather than shared.
  if (partial) {
    int b = pool_.allocate();
    if (b < 0) {
      clear();
      return false;
    }
    std::memcpy(pool_.page(b), pool_.page(blocks[complete]), static_cast<size_t>(pool_.page_bytes()));
    blocks_.push_back(b);
  }
  if (!ensure_ring()) {
    clear();
    return false;
  }
  for (size_t i = 0; i < ring_.size(); ++i) {
    std::memcpy(pool_.page(ring_[i]), pool_.page(ring_snapshot[i]), static_cast<size_t>(pool_.page_bytes()));
  }
  num_tokens_ = num_tokens;
  return true;
}

std::vector<int> SequenceKv::snapshot_ring() {
  std::vector<int> snap;
  for (int src : ring_) {
    int p = pool_.allocate();
    if (p < 0) {
      for (int q : snap) pool_.release(q);
      return {};
    }
    std::memcpy(pool_.page(p), pool_.page(src), static_cast<size_t>(pool_.page_bytes()));
    snap.push_back(p);
  }
  return snap;
}

int64_t SequenceKv::ring_bytes() const {
  if (ring_.empty()) return 0;
  return static_cast<int64_t>(pool_.num_sliding_layers()) * pool_.ring_capacity() *
         pool_.bytes_per_token_per_layer();
}

float* SequenceKv::full_entry(int full_layer, int64_t pos, int kv) {
  const int bs = pool_.block_size();
  float* page = pool_.page(blocks_[static_cast<size_t>(pos / bs)]);
  return page + ((static_cast<int64_t>(full_layer) * 2 + kv) * bs + pos % bs) * pool_.kv_dim();
}

float* SequenceKv::ring_entry(int sliding_layer, int64_t pos, int kv) {
  // Entry index in the ring's virtual layout [sliding layer][K, V][window - 1], spread over pages.
  const int64_t cap = pool_.ring_capacity();
  const int64_t entry = (static_cast<int64_t>(sliding_layer) * 2 + kv) * cap + pos % cap;
  const int64_t per_page = pool_.page_floats() / pool_.kv_dim();
  return pool_.page(ring_[static_cast<size_t>(entry / per_page)]) + (entry % per_page) * pool_.kv_dim();
}

}  // namespace spark
