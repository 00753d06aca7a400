// Key/value storage for the two kinds of attention layer.
//  - Full-attention layers keep every position, in fixed-size blocks drawn from a shared pool; a block
//    holds block_size positions of K and V for all full layers, and a sequence owns a table of blocks.
//  - Sliding layers only ever look back window-1 positions, so each sequence keeps a ring of exactly
//    window-1 entries per sliding layer; the positions of the chunk being computed are read from the
//    chunk itself, and its tail is copied into the ring afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "spark/model_config.h"

namespace spark {

class KvBlockPool {
 public:
  // max_blocks == 0: blocks are allocated on demand without limit.
  KvBlockPool(int num_full_layers, int kv_dim, int block_size, int64_t max_blocks);

  int block_size() const { return block_size_; }
  int64_t bytes_per_block() const { return block_floats_ * static_cast<int64_t>(sizeof(float)); }
  int64_t max_blocks() const { return max_blocks_; }
  int64_t blocks_in_use() const { return in_use_; }
  int64_t blocks_allocated() const { return static_cast<int64_t>(storage_.size()); }
  int64_t bytes_allocated() const { return blocks_allocated() * bytes_per_block(); }

  // Returns a free block id, or -1 when the pool is at max_blocks.
  int allocate();
  void release(int block);

  float* keys(int block, int full_layer) { return storage_[block].get() + full_layer * 2 * layer_floats_; }
  float* values(int block, int full_layer) { return keys(block, full_layer) + layer_floats_; }

 private:
  int num_full_layers_;
  int kv_dim_;
  int block_size_;
  int64_t max_blocks_;
  int64_t layer_floats_;
  int64_t block_floats_;
  int64_t in_use_ = 0;
  std::vector<std::unique_ptr<float[]>> storage_;
  std::vector<int> free_list_;
};

class SequenceKv {
 public:
  SequenceKv(const ModelConfig& config, KvBlockPool& pool);
  ~SequenceKv();
  SequenceKv(const SequenceKv&) = delete;
  SequenceKv& operator=(const SequenceKv&) = delete;

  // Positions already stored (the next chunk starts here).
  int64_t num_tokens() const { return num_tokens_; }
  // Makes room for positions up to total_tokens - 1 in the full layers; false if the pool ran out
  // (the sequence is left as it was).
  bool reserve(int64_t total_tokens);
  // Called by the forward pass once a chunk's K/V are stored.
  void advance(int64_t n) { num_tokens_ += n; }
  // Frees every block and forgets all positions.
  void clear();

  int ring_capacity() const { return ring_capacity_; }
  float* full_keys(int full_layer, int64_t pos);
  float* full_values(int full_layer, int64_t pos);
  float* ring_keys(int sliding_layer, int64_t pos) { return ring_entry(sliding_layer, pos, 0); }
  float* ring_values(int sliding_layer, int64_t pos) { return ring_entry(sliding_layer, pos, 1); }

  const std::vector<int>& blocks() const { return blocks_; }
  int64_t reserved_tokens() const { return static_cast<int64_t>(blocks_.size()) * pool_.block_size(); }
  int64_t ring_bytes() const { return static_cast<int64_t>(ring_.size() * sizeof(float)); }

 private:
  float* ring_entry(int sliding_layer, int64_t pos, int kv) {
    return ring_.data() + ((static_cast<int64_t>(sliding_layer) * 2 + kv) * ring_capacity_ + pos % ring_capacity_) * kv_dim_;
  }

  KvBlockPool& pool_;
  int kv_dim_;
  int ring_capacity_;
  int64_t num_tokens_ = 0;
  std::vector<int> blocks_;
  std::vector<float> ring_;  // [sliding layer][K, V][window - 1][kv_dim]
};

}  // namespace spark
