#include "model/kv_cache.h"

#include <algorithm>

#include "spark/error.h"

namespace spark {

KvBlockPool::KvBlockPool(int num_full_layers, int kv_dim, int block_size, int64_t max_blocks)
    : num_full_layers_(num_full_layers),
      kv_dim_(kv_dim),
      block_size_(block_size),
      max_blocks_(max_blocks),
      layer_floats_(static_cast<int64_t>(block_size) * kv_dim),
      block_floats_(2 * static_cast<int64_t>(num_full_layers) * block_size * kv_dim) {
  if (block_size <= 0) throw Error("KV block size must be positive");
}

int KvBlockPool::allocate() {
  if (!free_list_.empty()) {
    int b = free_list_.back();
    free_list_.pop_back();
    ++in_use_;
    return b;
  }
  if (max_blocks_ > 0 && blocks_allocated() >= max_blocks_) return -1;
  // A block with no full layers (a model of only sliding layers) still needs an id.
  storage_.emplace_back(new float[static_cast<size_t>(std::max<int64_t>(block_floats_, 1))]);
  ++in_use_;
  return static_cast<int>(storage_.size() - 1);
}

void KvBlockPool::release(int block) {
  free_list_.push_back(block);
  --in_use_;
}

SequenceKv::SequenceKv(const ModelConfig& config, KvBlockPool& pool)
    : pool_(pool), kv_dim_(config.kv_dim()), ring_capacity_(config.sliding_window - 1) {
  ring_.assign(static_cast<size_t>(config.num_sliding_layers()) * 2 * ring_capacity_ * kv_dim_, 0.0f);
}

SequenceKv::~SequenceKv() { clear(); }

bool SequenceKv::reserve(int64_t total_tokens) {
  const int64_t need = (total_tokens + pool_.block_size() - 1) / pool_.block_size();
  const size_t before = blocks_.size();
  while (static_cast<int64_t>(blocks_.size()) < need) {
    int b = pool_.allocate();
    if (b < 0) {
      while (blocks_.size() > before) {
        pool_.release(blocks_.back());
        blocks_.pop_back();
      }
      return false;
    }
    blocks_.push_back(b);
  }
  return true;
}

void SequenceKv::clear() {
  for (int b : blocks_) pool_.release(b);
  blocks_.clear();
  num_tokens_ = 0;
}

float* SequenceKv::full_keys(int full_layer, int64_t pos) {
  const int bs = pool_.block_size();
  return pool_.keys(blocks_[static_cast<size_t>(pos / bs)], full_layer) + (pos % bs) * kv_dim_;
}

float* SequenceKv::full_values(int full_layer, int64_t pos) {
  const int bs = pool_.block_size();
  return pool_.values(blocks_[static_cast<size_t>(pos / bs)], full_layer) + (pos % bs) * kv_dim_;
}

}  // namespace spark
