// config.json as a checkpoint ships it (parse_model_config). Anything malformed or unsupported must be a
// spark::Error naming the key. A config that parses must hold what the model code relies on: the sizes are
// the file's own values (not truncated to int), positive, consistent, and the derived projection widths fit
// in an int. The same bytes go through the checkpoint's other small JSON file, generation_config.json
// (parse_generation_config): a spark::Error or defaults within the request parser's ranges.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_check.h"
#include "model/generation_config.h"
#include "spark/error.h"
#include "spark/model_config.h"

using spark::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const spark::GenerationConfig g = spark::parse_generation_config(text, "generation_config.json");
    check(!g.temperature || (*g.temperature >= 0 && *g.temperature <= 2), "temperature out of range");
    check(!g.top_p || (*g.top_p > 0 && *g.top_p <= 1), "top_p out of range");
    check(!g.top_k || *g.top_k >= 0, "top_k negative");
    for (int32_t id : g.eos_token_ids) check(id >= 0, "negative eos id");
  } catch (const spark::Error&) {
  }
  spark::ModelConfig c;
  try {
    c = spark::parse_model_config(text, "config.json");
  } catch (const spark::Error&) {
    return 0;
  }
  const nlohmann::json j = nlohmann::json::parse(text);
  const std::pair<const char*, int64_t> sizes[] = {{"hidden_size", c.hidden_size},
                                                   {"intermediate_size", c.intermediate_size},
                                                   {"num_hidden_layers", c.num_layers},
                                                   {"num_attention_heads", c.num_heads},
                                                   {"num_key_value_heads", c.num_kv_heads},
                                                   {"head_dim", c.head_dim},
                                                   {"vocab_size", c.vocab_size},
                                                   {"sliding_window", c.sliding_window}};
  for (const auto& [key, value] : sizes) {
    check(value > 0, "size not positive", key);
    check(j.at(key).get<int64_t>() == value, "size differs from the file's value", key);
  }
  check(c.num_heads % c.num_kv_heads == 0, "heads not a multiple of kv heads");
  check(static_cast<int64_t>(c.num_heads) * c.head_dim +
                2 * static_cast<int64_t>(c.num_kv_heads) * c.head_dim <=
            INT32_MAX,
        "qkv width overflows int");
  check(static_cast<int>(c.layer_types.size()) == c.num_layers, "layer_types count");
  for (const spark::RopeParams* rope : {&c.rope_full, &c.rope_sliding}) {
    check(rope->rotary_dim > 0 && rope->rotary_dim <= c.head_dim && rope->rotary_dim % 2 == 0, "rotary_dim");
    check(rope->theta > 0, "rope theta");
  }
  check(c.rms_norm_eps > 0, "rms_norm_eps");
  return 0;
}
