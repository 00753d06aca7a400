// The Spark-X2.5 forward pass. One call runs one step over a batch of sequence chunks: every weight
// GEMM runs once over all of the step's tokens, attention runs per sequence against its own KV cache.
// A chunk of one token is a decode step; a longer chunk is (part of) a prefill.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gemm_float/gemm_float.h"
#include "model/checkpoint.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "util/thread_pool.h"

namespace spark {

enum class LogitsMode {
  kNone,  // a prefill chunk that does not reach the end of the known tokens: nothing to sample
  kLast,  // the last position only (sampling)
  kAll,   // every position (scoring, tests, the generate command's --logits-out)
};

struct SequenceChunk {
  SequenceKv* kv = nullptr;  // the chunk's positions start at kv->num_tokens()
  const int32_t* tokens = nullptr;
  int64_t num_tokens = 0;
  LogitsMode logits = LogitsMode::kLast;
};

// Called with each named intermediate: name ("qkv", "attn_out", ...), layer (-1 outside layers), and a
// row-major [rows, cols] buffer whose rows are the step's tokens in chunk order.
using ActivationTap =
    std::function<void(const std::string& name, int layer, const float* data, int64_t rows, int64_t cols)>;

class SparkModel {
 public:
  SparkModel(std::shared_ptr<const Checkpoint> checkpoint, int64_t max_model_len);

  const ModelConfig& config() const { return config_; }
  int64_t max_model_len() const { return max_model_len_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }

  // Runs one step. `logits` receives, chunk by chunk, num_tokens rows (kAll), one row (kLast) or none,
  // each of vocab_size floats. Every chunk's KV must already hold room for its positions
  // (SequenceKv::reserve); positions past max_model_len or token ids outside the vocabulary throw
  // spark::Error.
  void forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits, ThreadPool& pool);

  void set_activation_tap(ActivationTap tap) { tap_ = std::move(tap); }

 private:
  struct Layer {
    LayerType type;
    int type_index;  // index among layers of the same type (KV storage slot)
    std::vector<float> attn_norm;
    std::vector<float> ffn_norm;
    kernels::FloatWeight qkv, gate, out, ffn_gate, ffn_up, ffn_down;
  };

  void tap(const char* name, int layer, const float* data, int64_t rows, int64_t cols) const {
    if (tap_) tap_(name, layer, data, rows, cols);
  }
  void attention(const Layer& layer, std::span<const SequenceChunk> chunks, ThreadPool& pool);
  void store_kv(const Layer& layer, std::span<const SequenceChunk> chunks);

  std::shared_ptr<const Checkpoint> checkpoint_;
  ModelConfig config_;
  int64_t max_model_len_;
  RopeTable rope_sliding_;
  RopeTable rope_full_;
  kernels::FloatWeight embedding_;
  kernels::FloatWeight lm_head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  ActivationTap tap_;

  // Step workspaces, reused across calls ([tokens, width] row-major).
  std::vector<float> x_, h_, qkv_, gate_, attn_, proj_, ffn_gate_, ffn_up_, head_in_;
  std::vector<int64_t> token_pos_;    // absolute position of each step token
  std::vector<int64_t> chunk_begin_;  // first step row of each chunk
};

kernels::FloatWeight float_weight_from(const TensorInfo& t);

}  // namespace spark
