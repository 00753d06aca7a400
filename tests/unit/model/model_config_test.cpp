#include "spark/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/synthetic_checkpoint.h"
#include "spark/error.h"

namespace spark {

namespace {

std::string with(const std::string& base, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(base);
  edit(j);
  return j.dump();
}

void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_model_config(text, "config.json");
    FAIL() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "error must be one line: " << e.what();
  }
}

}  // namespace

TEST(ModelConfig, ParsesTheReal17BConfig) {
  ModelConfig c = parse_model_config(builtin_config("spark-x2.5-1.7b"), "1.7b");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.q_dim(), 2048);
  EXPECT_EQ(c.qkv_dim(), 3072);
  EXPECT_EQ(c.num_sliding_layers(), 21);
  EXPECT_EQ(c.num_full_layers(), 7);
  EXPECT_EQ(c.layer_types[3], LayerType::kFull);
  EXPECT_EQ(c.layer_types[27], LayerType::kFull);
  EXPECT_EQ(c.rope_full.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_full.theta, 5e6);
  EXPECT_EQ(c.rope_sliding.rotary_dim, 256);
  EXPECT_DOUBLE_EQ(c.rope_sliding.theta, 1e4);
  EXPECT_EQ(c.sliding_window, 512);
}

TEST(ModelConfig, The4BKeepsHeadDimFromTheFile) {
  ModelConfig c = parse_model_config(builtin_config("spark-x2.5-4b"), "4b");
  EXPECT_EQ(c.head_dim, 256);  // hidden / heads would give 160
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_NE(c.q_dim(), c.hidden_size);
  EXPECT_EQ(c.num_full_layers(), 9);
}

TEST(ModelConfig, AcceptsSpark3Alias) {
  auto text = with(builtin_config("tiny"), [](auto& j) { j["model_type"] = "spark3"; });
  EXPECT_EQ(parse_model_config(text, "x").model_type, "spark3");
}

TEST(ModelConfig, FailsClosedOnUnsupportedSettings) {
  const std::string base = builtin_config("tiny");
  expect_error(with(base, [](auto& j) { j["attention_bias"] = true; }), "attention_bias");
  expect_error(with(base, [](auto& j) { j["mlp_bias"] = true; }), "mlp_bias");
  expect_error(with(base, [](auto& j) { j["gate_attn_act_mode"] = "tanh"; }), "gate_attn_act_mode");
  expect_error(with(base, [](auto& j) { j["hidden_act"] = "relu"; }), "hidden_act");
  expect_error(with(base,
                    [](auto& j) {
                      j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
                    }),
               "rope_scaling");
  expect_error(with(base, [](auto& j) { j["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; }),
               "rope scaling");
  expect_error(with(base, [](auto& j) { j["model_type"] = "llama"; }), "model_type");
  expect_error(with(base, [](auto& j) { j.erase("head_dim"); }), "head_dim");
  expect_error(with(base, [](auto& j) { j["layer_types"].erase(0); }), "layer_types");
  expect_error(with(base, [](auto& j) { j["layer_types"][0] = "chunked_attention"; }), "layer_types");
  expect_error(with(base, [](auto& j) { j["num_key_value_heads"] = 3; }), "num_attention_heads");
  expect_error(with(base, [](auto& j) { j["hidden_size"] = "128"; }), "hidden_size");
  expect_error("{not json", "not valid JSON");
  expect_error(with(base, [](auto& j) { j["eos_token_id"] = nlohmann::json::array(); }), "eos_token_id");
  expect_error(with(base, [](auto& j) { j["eos_token_id"] = {1, "2"}; }), "eos_token_id");
  expect_error(with(base, [](auto& j) { j["eos_token_id"] = -1; }), "eos_token_id");
  // A window past the context never slides; 2^30 wrapped the KV ring's page count (a SIGSEGV).
  expect_error(with(base,
                    [](auto& j) {
                      j["max_position_embeddings"] = 4096;
                      j["sliding_window"] = 4097;
                    }),
               "sliding_window");
  expect_error(with(base, [](auto& j) { j["sliding_window"] = 1073741826; }), "sliding_window");
}

// The forms Hugging Face exports take: eos_token_id as a list, torch_dtype, rope_scaling null, keys that do
// not change the computation.
TEST(ModelConfig, AcceptsOrdinaryExportForms) {
  const std::string base = builtin_config("tiny");
  ModelConfig one = parse_model_config(base, "config.json");
  EXPECT_EQ(one.eos_token_id, 1);
  EXPECT_EQ(one.eos_token_ids, (std::vector<int>{1}));
  ModelConfig list = parse_model_config(with(base,
                                             [](auto& j) {
                                               j["eos_token_id"] = {1, 7};
                                             }),
                                        "config.json");
  EXPECT_EQ(list.eos_token_id, 1);
  EXPECT_EQ(list.eos_token_ids, (std::vector<int>{1, 7}));
  ModelConfig torch = parse_model_config(with(base,
                                              [](auto& j) {
                                                j.erase("dtype");
                                                j["torch_dtype"] = "float32";
                                                j["rope_scaling"] = nullptr;
                                                j["transformers_version"] = "4.57.0";
                                                j["use_cache"] = true;
                                                j["initializer_range"] = 0.02;
                                              }),
                                         "config.json");
  EXPECT_EQ(torch.dtype, "float32");
}

// Found by the model_config fuzz harness (tests/fuzz): sizes were cast to int unchecked (4294967296 kv heads
// became 0 and num_heads % num_kv_heads divided by zero), a number overflowing a double threw
// nlohmann's out_of_range, and a non-string quant_method threw its type_error, instead of a spark::Error.
TEST(ModelConfig, RejectsValuesOutsideTheirTypes) {
  const std::string base = builtin_config("tiny");
  expect_error(with(base, [](auto& j) { j["num_key_value_heads"] = 4294967296LL; }), "num_key_value_heads");
  expect_error(with(base, [](auto& j) { j["hidden_size"] = 4294967297LL; }), "hidden_size");
  expect_error(with(base, [](auto& j) { j["vocab_size"] = 18446744073709551615ULL; }), "vocab_size");
  expect_error(with(base, [](auto& j) { j["head_dim"] = 1 << 30; }), "head_dim");
  expect_error(with(base, [](auto& j) { j["eos_token_id"] = 2147483648LL; }), "eos_token_id");
  expect_error(with(base, [](auto& j) { j["quantization_config"] = {{"quant_method", 5}}; }), "quant_method");
  expect_error(R"({"model_type": "spark2_5", "hidden_size": 1e999})", "not valid JSON");
}

}  // namespace spark
