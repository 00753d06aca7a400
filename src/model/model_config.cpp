#include "spark/model_config.h"

#include <spdlog/spdlog.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <set>

#include "spark/error.h"
#include "util/bounded_json.h"
#include "util/text_file.h"

namespace spark {

namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(source_ + ": " + key + ": " + what);
  }

  const json* find(const std::string& key) const {
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  // Values above max_value (by default what an int holds: the sizes are ints in ModelConfig) are errors,
  // never truncated; an unsigned value above INT64_MAX is too.
  int64_t integer(const std::string& key, int64_t min_value, int64_t max_value = INT_MAX) const {
    const json* v = find(key);
    if (v == nullptr) fail(key, "missing");
    return checked(key, *v, min_value, max_value);
  }

  int64_t integer_or(const std::string& key, int64_t fallback) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return fallback;
    return checked(key, *v, INT_MIN, INT_MAX);
  }

  int64_t checked(const std::string& key, const json& v, int64_t min_value, int64_t max_value) const {
    if (!v.is_number_integer()) fail(key, "must be an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(key, "is too large");
    const int64_t x = v.get<int64_t>();
    if (x < min_value) fail(key, "must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
    if (x > max_value) fail(key, "must be <= " + std::to_string(max_value) + ", got " + std::to_string(x));
    return x;
  }

  double number_or(const std::string& key, double fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(key, "must be a number");
    return v->get<double>();
  }

  bool boolean_or(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_boolean()) fail(key, "must be true or false");
    return v->get<bool>();
  }

  std::string string_or(const std::string& key, const std::string& fallback) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_string()) fail(key, "must be a string");
    return v->get<std::string>();
  }

 private:
  const json& j_;
  std::string source_;
};

// A token id given as an integer or, as many exports write eos_token_id, a non-empty list of integers.
std::vector<int> token_id_list(const ConfigReader& r, const std::string& key, int fallback) {
  const json* v = r.find(key);
  if (v == nullptr || v->is_null()) return {fallback};
  std::vector<int> ids;
  auto take = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX) {
      r.fail(key, "must be a token id or a list of token ids");
    }
    ids.push_back(x.get<int>());
  };
  if (v->is_array()) {
    for (const json& x : *v) take(x);
    if (ids.empty()) r.fail(key, "must not be an empty list");
  } else {
    take(*v);
  }
  return ids;
}

// Keys of a Hugging Face config.json that this loader reads, refuses or knows to be irrelevant to the
// math; anything else is logged at debug level and ignored.
bool known_config_key(const std::string& key) {
  static const std::set<std::string> kKnown = {"model_type",
                                               "hidden_size",
                                               "intermediate_size",
                                               "num_hidden_layers",
                                               "num_attention_heads",
                                               "num_key_value_heads",
                                               "head_dim",
                                               "vocab_size",
                                               "sliding_window",
                                               "max_position_embeddings",
                                               "rms_norm_eps",
                                               "attention_bias",
                                               "mlp_bias",
                                               "rope_scaling",
                                               "tie_word_embeddings",
                                               "hidden_act",
                                               "headwise_attn_output_gate",
                                               "gate_attn_act_mode",
                                               "layer_types",
                                               "rope_parameters",
                                               "bos_token_id",
                                               "eos_token_id",
                                               "pad_token_id",
                                               "dtype",
                                               "torch_dtype",
                                               "quantization_config"};
  return kKnown.contains(key);
}

RopeParams parse_rope(const ConfigReader& r, const json& params, const std::string& key, int head_dim) {
  if (!params.is_object()) r.fail(key, "must be an object");
  for (const char* scaling_key : {"rope_type", "type"}) {
    auto it = params.find(scaling_key);
    if (it != params.end() && !(it->is_string() && it->get<std::string>() == "default")) {
      r.fail(key, "rope scaling is not supported (" + std::string(scaling_key) + " = " + it->dump() + ")");
    }
  }
  for (const char* scaling_key : {"factor", "original_max_position_embeddings"}) {
    if (params.contains(scaling_key))
      r.fail(key, "rope scaling is not supported (" + std::string(scaling_key) + ")");
  }
  auto theta = params.find("rope_theta");
  if (theta == params.end() || !theta->is_number() || theta->get<double>() <= 0) {
    r.fail(key, "rope_theta missing or not a positive number");
  }
  double factor = 1.0;
  auto f = params.find("partial_rotary_factor");
  if (f != params.end()) {
    if (!f->is_number()) r.fail(key, "partial_rotary_factor must be a number");
    factor = f->get<double>();
  }
  if (!(factor > 0.0 && factor <= 1.0)) r.fail(key, "partial_rotary_factor must be in (0, 1]");
  double dims = factor * head_dim;
  int rd = static_cast<int>(dims + 0.5);
  if (std::abs(dims - rd) > 1e-6 || rd % 2 != 0 || rd == 0) {
    r.fail(key,
           "partial_rotary_factor * head_dim = " + std::to_string(dims) + " is not a positive even integer");
  }
  return RopeParams{theta->get<double>(), rd};
}

}  // namespace

int ModelConfig::num_sliding_layers() const {
  int n = 0;
  for (LayerType t : layer_types) n += t == LayerType::kSliding ? 1 : 0;
  return n;
}

int ModelConfig::num_full_layers() const {
  return num_layers - num_sliding_layers();
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = parse_json_bounded(json_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw Error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(source + ": top level must be a JSON object");
  ConfigReader r(j, source);
  std::string ignored;
  for (const auto& [key, _] : j.items()) {
    if (!known_config_key(key)) ignored += (ignored.empty() ? "" : ", ") + key;
  }
  if (!ignored.empty())
    spdlog::debug("{}: ignoring keys that do not change the computation: {}", source, ignored);
  ModelConfig c;

  c.model_type = r.string_or("model_type", "");
  if (c.model_type != "spark2_5" && c.model_type != "spark3") {
    r.fail("model_type", "unsupported model type '" + c.model_type + "' (expected spark2_5 or spark3)");
  }
  c.hidden_size = static_cast<int>(r.integer("hidden_size", 1));
  c.intermediate_size = static_cast<int>(r.integer("intermediate_size", 1));
  c.num_layers = static_cast<int>(r.integer("num_hidden_layers", 1));
  c.num_heads = static_cast<int>(r.integer("num_attention_heads", 1));
  c.num_kv_heads = static_cast<int>(r.integer("num_key_value_heads", 1));
  c.head_dim = static_cast<int>(r.integer("head_dim", 2));
  c.vocab_size = static_cast<int>(r.integer("vocab_size", 16));
  c.sliding_window = static_cast<int>(r.integer("sliding_window", 2));
  c.max_position_embeddings = r.integer("max_position_embeddings", 1, INT64_MAX);
  // A window longer than any sequence never slides; the KV rings are sized by it.
  if (c.sliding_window > c.max_position_embeddings) {
    r.fail("sliding_window",
           "must not exceed max_position_embeddings (" + std::to_string(c.max_position_embeddings) + ")");
  }
  c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  if (c.num_heads % c.num_kv_heads != 0) {
    r.fail("num_attention_heads", "must be a multiple of num_key_value_heads");
  }
  if (c.head_dim % 2 != 0) r.fail("head_dim", "must be even");
  // q_dim() + 2 * kv_dim() is computed in int.
  if (c.head_dim > INT_MAX / (static_cast<int64_t>(c.num_heads) + 2 * static_cast<int64_t>(c.num_kv_heads))) {
    r.fail("head_dim",
           "num_attention_heads + 2 * num_key_value_heads heads of head_dim do not fit in an int");
  }

  if (r.boolean_or("attention_bias", false)) r.fail("attention_bias", "true is not supported");
  if (r.boolean_or("mlp_bias", false)) r.fail("mlp_bias", "true is not supported");
  if (const json* scaling = r.find("rope_scaling"); scaling != nullptr && !scaling->is_null()) {
    r.fail("rope_scaling", "rope scaling is not supported");
  }
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", true);

  std::string act = r.string_or("hidden_act", "gelu");
  if (act != "gelu") r.fail("hidden_act", "unsupported activation '" + act + "' (expected gelu, exact erf)");
  if (!r.boolean_or("headwise_attn_output_gate", true)) {
    r.fail("headwise_attn_output_gate", "false is not supported (the gate is part of this architecture)");
  }
  std::string gate = r.string_or("gate_attn_act_mode", "sigmoid");
  if (gate == "sigmoid") {
    c.gate_activation = GateActivation::kSigmoid;
  } else if (gate == "silu") {
    c.gate_activation = GateActivation::kSilu;
  } else {
    r.fail("gate_attn_act_mode", "unsupported gate mode '" + gate + "' (expected sigmoid or silu)");
  }

  const json* types = r.find("layer_types");
  if (types == nullptr || !types->is_array()) r.fail("layer_types", "missing or not a list");
  if (static_cast<int>(types->size()) != c.num_layers) {
    r.fail("layer_types", "has " + std::to_string(types->size()) + " entries for " +
                              std::to_string(c.num_layers) + " layers");
  }
  for (const auto& t : *types) {
    if (t == "sliding_attention") {
      c.layer_types.push_back(LayerType::kSliding);
    } else if (t == "full_attention") {
      c.layer_types.push_back(LayerType::kFull);
    } else {
      r.fail("layer_types", "unknown layer type " + t.dump());
    }
  }

  const json* rope = r.find("rope_parameters");
  if (rope == nullptr || !rope->is_object()) r.fail("rope_parameters", "missing or not an object");
  if (!rope->contains("full_attention") || !rope->contains("sliding_attention")) {
    r.fail("rope_parameters", "needs both full_attention and sliding_attention entries");
  }
  c.rope_full = parse_rope(r, rope->at("full_attention"), "rope_parameters.full_attention", c.head_dim);
  c.rope_sliding =
      parse_rope(r, rope->at("sliding_attention"), "rope_parameters.sliding_attention", c.head_dim);

  c.bos_token_id = static_cast<int>(r.integer_or("bos_token_id", 0));
  c.eos_token_ids = token_id_list(r, "eos_token_id", 1);
  c.eos_token_id = c.eos_token_ids.front();
  c.pad_token_id = static_cast<int>(r.integer_or("pad_token_id", 2));
  c.dtype = r.string_or("dtype", r.string_or("torch_dtype", "bfloat16"));
  if (const json* q = r.find("quantization_config"); q != nullptr && !q->is_null()) {
    if (!q->is_object()) r.fail("quantization_config", "must be an object");
    const ConfigReader qr(*q, source + ": quantization_config");
    const std::string method = qr.string_or("quant_method", "");
    if (method != "spark") {
      r.fail("quantization_config",
             "quant_method '" + method + "' is not supported (only spark-quantize output)");
    }
    c.quant_format = qr.string_or("format", "");
    if (c.quant_format != "int8" && c.quant_format != "w4a8" && c.quant_format != "w4a16") {
      r.fail("quantization_config", "format '" + c.quant_format + "' is not one of int8, w4a8, w4a16");
    }
    if (!q->contains("layout_version") || !(*q)["layout_version"].is_number_integer()) {
      r.fail("quantization_config", "layout_version missing");
    }
    c.quant_layout_version = static_cast<int>(qr.integer("layout_version", INT_MIN));
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  return parse_model_config(read_text_file(path), path.string());
}

}  // namespace spark
