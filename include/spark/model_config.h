// The model's hyper-parameters, read from a checkpoint's config.json. Every value comes from the file:
// head_dim, layer types and per-type RoPE parameters are never derived from other keys.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace spark {

enum class LayerType { kSliding, kFull };
enum class GateActivation { kSigmoid, kSilu };

struct RopeParams {
  double theta = 10000.0;
  int rotary_dim = 0;  // head_dim * partial_rotary_factor: dims >= rotary_dim pass through
};

struct ModelConfig {
  std::string model_type;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int sliding_window = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  GateActivation gate_activation = GateActivation::kSigmoid;
  std::vector<LayerType> layer_types;
  RopeParams rope_sliding;
  RopeParams rope_full;
  int bos_token_id = 0;
  int eos_token_id = 1;            // the first of eos_token_ids
  std::vector<int> eos_token_ids;  // config.json's eos_token_id: an integer or a list, each stops generation
  int pad_token_id = 2;
  std::string dtype;
  // A pre-quantized checkpoint (written by spark-quantize): quantization_config.format ("int8", "w4a8",
  // "w4a16") and the packed layout version; empty for float checkpoints.
  std::string quant_format;
  int quant_layout_version = 0;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  int num_sliding_layers() const;
  int num_full_layers() const;
  const RopeParams& rope_for(LayerType type) const {
    return type == LayerType::kSliding ? rope_sliding : rope_full;
  }
};

// Parses and validates config.json text. `source` names the file in error messages. Unsupported
// settings (biases, rope scaling, unknown activations or gate modes) fail closed with spark::Error.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& path);

}  // namespace spark
