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

#include "attention/attention.h"
#include "gemm/weight.h"
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

// How the linear layers' weights are held. kAsStored keeps the checkpoint's own float dtype (bf16 / f16 /
// f32, memory-mapped, no copy) or, for a pre-quantized checkpoint, its packed format. kAuto lets the
// hardware probe choose (speed: W4A8 where int8 dot products are fast, else W4A16; fidelity: W4A16).
enum class QuantChoice { kAsStored, kAuto, kExplicit };
enum class QuantPriority { kSpeed, kFidelity };

struct ModelOptions {
  int64_t max_model_len = 4096;
  QuantChoice quant = QuantChoice::kAsStored;
  kernels::WeightFormat format = kernels::WeightFormat::kBF16;  // with kExplicit
  QuantPriority priority = QuantPriority::kSpeed;
  // bf16 weights only (--bf16-activations): round the linear layers' inputs to bf16 so prefill runs bf16
  // dot products (AMX-BF16, AVX512-BF16), as llama.cpp's BF16 does. Off: exact f32 products.
  bool bf16_activations = false;
};

// Parses a --quant value: "auto", "none" (as stored) or a format name (f32, bf16, f16, int8, w4a8, w4a16).
void parse_quant_option(const std::string& value, const std::string& priority, ModelOptions& options);

class SparkModel {
 public:
  SparkModel(std::shared_ptr<const Checkpoint> checkpoint, int64_t max_model_len);
  // Quantizes at load when asked (row blocks on `pool`, so the transient memory stays small).
  SparkModel(std::shared_ptr<const Checkpoint> checkpoint, const ModelOptions& options, ThreadPool& pool);

  const ModelConfig& config() const { return config_; }
  int64_t max_model_len() const { return max_model_len_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  // The linear layers' weight format, and the bytes they occupy (what decode reads per token).
  kernels::WeightFormat weight_format() const { return format_; }
  int64_t weight_bytes() const;
  // Named weights, for spark-quantize: tensor prefix ("model.layers.0.mlp.up_proj") -> weight.
  std::vector<std::pair<std::string, const kernels::QuantizedWeight*>> linear_weights() const;

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
    kernels::QuantizedWeight gate;  // [heads, hidden]: tiny and kept in the checkpoint's float dtype
    kernels::QuantizedWeight qkv, out, ffn_gate, ffn_up, ffn_down;
  };

  void tap(const char* name, int layer, const float* data, int64_t rows, int64_t cols) const {
    if (tap_) tap_(name, layer, data, rows, cols);
  }
  void attention(const Layer& layer, std::span<const SequenceChunk> chunks, ThreadPool& pool);
  void store_kv(const Layer& layer, std::span<const SequenceChunk> chunks);
  void round_kv(int64_t total, KvDtype dtype, ThreadPool& pool);

  std::shared_ptr<const Checkpoint> checkpoint_;
  ModelConfig config_;
  int64_t max_model_len_;
  RopeTable rope_sliding_;
  RopeTable rope_full_;
  kernels::WeightFormat format_;
  kernels::QuantizedWeight embedding_;
  kernels::QuantizedWeight lm_head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  ActivationTap tap_;

  // Step workspaces, reused across calls ([tokens, width] row-major).
  std::vector<float> x_, h_, qkv_, gate_, attn_, proj_, ffn_gate_, ffn_up_, head_in_;
  // bf16 and fp8 KV caches: each step row's K and V after RoPE, rounded once ([row][K | V], elements of
  // the cache's type); the cache stores these and attention reads a chunk's own keys from here, so every
  // key it sees is rounded alike.
  std::vector<char> kv_rounded_;
  std::vector<int64_t> token_pos_;    // absolute position of each step token
  std::vector<int64_t> chunk_begin_;  // first step row of each chunk
  std::vector<kernels::KvSpan> spans_;  // attention's key runs, all chunks of one layer
  std::vector<size_t> first_span_;      // each chunk's first entry in spans_
  std::vector<kernels::AttentionTask> attn_tasks_;  // one per chunk
};

kernels::FloatWeight float_weight_from(const TensorInfo& t);

// Reads a linear weight `prefix` (e.g. "model.layers.3.mlp.up_proj") from the checkpoint: `.weight` of a
// float checkpoint, or the packed tensors of a pre-quantized one.
kernels::QuantizedWeight load_linear(const Checkpoint& ck, const std::string& prefix);

}  // namespace spark
