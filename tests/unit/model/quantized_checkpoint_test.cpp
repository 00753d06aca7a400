// Pre-quantized checkpoints: what spark-quantize writes must load by mapping (no conversion) and give
// exactly the logits of quantizing the float checkpoint at load; damaged or mismatched ones fail with
// an error naming the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "model/quantization_report.h"
#include "model/quantized_checkpoint.h"
#include "model/spark_model.h"
#include "model/synthetic_checkpoint.h"
#include "spark/error.h"

namespace spark {

namespace {

namespace fs = std::filesystem;
using kernels::WeightFormat;

std::string untied(std::string config) {
  const std::string from = "\"tie_word_embeddings\": true";
  config.replace(config.find(from), from.size(), "\"tie_word_embeddings\": false");
  return config;
}

class QuantizedCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ =
        new fs::path(fs::temp_directory_path() / ("spark-quantized-ckpt-test-" + std::to_string(::getpid())));
    write_synthetic_checkpoint({builtin_config("tiny"), 5, "BF16", 1, {}}, *root_ / "tiny");
    write_synthetic_checkpoint({untied(builtin_config("tiny-asym")), 6, "F32", 2, {}}, *root_ / "asym-untied");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }

  static std::shared_ptr<const Checkpoint> open(const fs::path& dir) {
    return std::make_shared<const Checkpoint>(dir);
  }

  ModelOptions quantize_to(WeightFormat f) {
    ModelOptions o{256};
    o.quant = QuantChoice::kExplicit;
    o.format = f;
    return o;
  }

  // Prompt longer than both test configs' windows (32 and 8), then greedy tokens.
  ModelProbe probe(SparkModel& m) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> dist(16, m.config().vocab_size - 1);
    std::vector<int32_t> prompt(80);
    for (auto& t : prompt) t = dist(rng);
    return probe_model(m, prompt, 12, pool_);
  }

  static fs::path* root_;
  ThreadPool pool_{2};
};

fs::path* QuantizedCheckpoint::root_ = nullptr;

TEST_F(QuantizedCheckpoint, LoadsMappedAndMatchesQuantizeAtLoadExactly) {
  for (const char* source : {"tiny", "asym-untied"}) {
    for (WeightFormat f : {WeightFormat::kInt8, WeightFormat::kW4A8, WeightFormat::kW4A16}) {
      SCOPED_TRACE(std::string(source) + " " + kernels::weight_format_name(f));
      SparkModel at_load(open(*root_ / source), quantize_to(f), pool_);
      const fs::path out = *root_ / (std::string(source) + "-" + kernels::weight_format_name(f));
      write_quantized_checkpoint(at_load, out);

      SparkModel loaded(open(out), ModelOptions{256}, pool_);
      EXPECT_EQ(loaded.weight_format(), f);
      EXPECT_EQ(loaded.weight_bytes(), at_load.weight_bytes());
      const auto weights = loaded.linear_weights();
      EXPECT_EQ(weights.size(), at_load.linear_weights().size());
      for (const auto& [name, w] : weights) {
        EXPECT_EQ(w->owner, nullptr) << name << " was copied instead of used in the mapping";
        EXPECT_EQ(reinterpret_cast<uintptr_t>(w->qweight) % 64, 0u) << name << " is not cache-line aligned";
      }
      const ModelProbe a = probe(at_load), b = probe(loaded);
      EXPECT_EQ(a.logits, b.logits);
      EXPECT_EQ(a.greedy, b.greedy);

      // Loading it asking for its own format is the same; asking for another is a clear error.
      EXPECT_NO_THROW(SparkModel(open(out), quantize_to(f), pool_));
      try {
        SparkModel(open(out),
                   quantize_to(f == WeightFormat::kInt8 ? WeightFormat::kW4A16 : WeightFormat::kInt8), pool_);
        ADD_FAILURE() << "converting a pre-quantized checkpoint must fail";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("pre-quantized"), std::string::npos) << e.what();
      }
    }
  }
}

// --bf16-activations marks every projection of a bf16 model (linear_weights: the embedding / head and each
// layer's five) and is refused, naming the format, for any other weights rather than ignored.
TEST_F(QuantizedCheckpoint, Bf16ActivationsOnlyForBf16Weights) {
  ModelOptions o{256};
  o.bf16_activations = true;
  SparkModel m(open(*root_ / "tiny"), o, pool_);
  ASSERT_EQ(m.weight_format(), WeightFormat::kBF16);
  for (const auto& [name, w] : m.linear_weights()) {
    EXPECT_TRUE(w->bf16_activations) << name;
  }
  SparkModel exact(open(*root_ / "tiny"), ModelOptions{256}, pool_);
  for (const auto& [name, w] : exact.linear_weights()) EXPECT_FALSE(w->bf16_activations) << name;
  EXPECT_NE(probe(m).logits, probe(exact).logits);  // the rounding reaches the logits

  ModelOptions to_w4a8 = quantize_to(WeightFormat::kW4A8);
  to_w4a8.bf16_activations = true;
  try {
    SparkModel(open(*root_ / "tiny"), to_w4a8, pool_);
    ADD_FAILURE() << "--bf16-activations with w4a8 weights must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs bf16 weights"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("w4a8"), std::string::npos) << e.what();
  }
  try {  // an f32 checkpoint kept as stored
    SparkModel(open(*root_ / "asym-untied"),
               ModelOptions{256, QuantChoice::kAsStored, WeightFormat::kBF16, QuantPriority::kSpeed, true},
               pool_);
    ADD_FAILURE() << "--bf16-activations with f32 weights must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32"), std::string::npos) << e.what();
  }
}

TEST_F(QuantizedCheckpoint, CopiesTheFolderAndRecordsTheLayout) {
  SparkModel m(open(*root_ / "tiny"), quantize_to(WeightFormat::kW4A16), pool_);
  const fs::path out = *root_ / "copied";
  const QuantizedCheckpointSummary s = write_quantized_checkpoint(m, out);
  EXPECT_EQ(s.files, std::vector<std::string>{"model.safetensors"});
  for (const char* file :
       {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  std::ifstream in(out / "config.json");
  const auto cfg = nlohmann::json::parse(in);
  EXPECT_EQ(cfg["quantization_config"]["quant_method"], "spark");
  EXPECT_EQ(cfg["quantization_config"]["format"], "w4a16");
  EXPECT_EQ(cfg["quantization_config"]["layout_version"], kernels::kLayoutVersion);
  EXPECT_EQ(cfg["hidden_size"], m.config().hidden_size);
  // No staging folder is left beside the output.
  for (const auto& e : fs::directory_iterator(*root_)) {
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
  }
}

TEST_F(QuantizedCheckpoint, ShardsLoadLikeOneFile) {
  SparkModel m(open(*root_ / "tiny"), quantize_to(WeightFormat::kInt8), pool_);
  const fs::path out = *root_ / "sharded";
  const QuantizedCheckpointSummary s = write_quantized_checkpoint(m, out, 64 << 10);
  EXPECT_GT(s.files.size(), 3u);
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  // Each file stays under the limit unless it holds one tensor larger than the limit.
  std::ifstream in(out / "model.safetensors.index.json");
  const auto index = nlohmann::json::parse(in);
  for (const auto& f : s.files) {
    int tensors = 0;
    for (const auto& [name, file] : index["weight_map"].items()) tensors += file == f;
    EXPECT_GT(tensors, 0) << f;
    if (tensors > 1) {
      EXPECT_LE(fs::file_size(out / f), (64u << 10) + 8192u) << f;
    }
  }
  SparkModel loaded(open(out), ModelOptions{256}, pool_);
  EXPECT_EQ(probe(loaded).logits, probe(m).logits);
}

TEST_F(QuantizedCheckpoint, RefusesWhatItCannotWriteAndLeavesNothing) {
  SparkModel f32(open(*root_ / "tiny"), quantize_to(WeightFormat::kF32), pool_);
  EXPECT_THROW(write_quantized_checkpoint(f32, *root_ / "float-out"), Error);
  EXPECT_FALSE(fs::exists(*root_ / "float-out"));

  SparkModel int8(open(*root_ / "tiny"), quantize_to(WeightFormat::kInt8), pool_);
  const fs::path busy = *root_ / "busy";
  fs::create_directories(busy);
  std::ofstream(busy / "keep.txt") << "user data";
  EXPECT_THROW(write_quantized_checkpoint(int8, busy), Error);
  EXPECT_TRUE(fs::exists(busy / "keep.txt"));
  EXPECT_THROW(write_quantized_checkpoint(int8, *root_ / "tiny"), Error);  // the source itself

  const fs::path out = *root_ / "requantize";
  write_quantized_checkpoint(int8, out);
  SparkModel again(open(out), ModelOptions{256}, pool_);
  EXPECT_THROW(write_quantized_checkpoint(again, *root_ / "requantize-2"), Error);
}

// Rewrites one tensor's header entry of a written checkpoint (keeps the data bytes as they are).
void edit_header(const fs::path& file, const std::function<void(nlohmann::ordered_json&)>& edit) {
  std::ifstream in(file, std::ios::binary);
  std::string blob((std::istreambuf_iterator<char>(in)), {});
  uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  auto header = nlohmann::ordered_json::parse(blob.substr(8, n));
  edit(header);
  std::string text = header.dump();
  ASSERT_LE(text.size(), n);
  text.append(n - text.size(), ' ');
  blob.replace(8, n, text);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << blob;
}

TEST_F(QuantizedCheckpoint, DamagedFilesNameTheProblem) {
  SparkModel m(open(*root_ / "tiny"), quantize_to(WeightFormat::kW4A8), pool_);
  auto expect_error = [&](const char* name, const std::function<void(const fs::path&)>& damage,
                          const std::string& says) {
    SCOPED_TRACE(name);
    const fs::path out = *root_ / (std::string("damaged-") + name);
    write_quantized_checkpoint(m, out);
    damage(out);
    try {
      SparkModel(open(out), ModelOptions{256}, pool_);
      ADD_FAILURE() << "loaded a damaged checkpoint";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error(
      "layout",
      [](const fs::path& out) {
        std::ifstream in(out / "config.json");
        auto cfg = nlohmann::ordered_json::parse(in);
        cfg["quantization_config"]["layout_version"] = kernels::kLayoutVersion + 1;
        std::ofstream(out / "config.json") << cfg.dump(2);
      },
      "quantize the checkpoint again");
  expect_error(
      "shape",
      [](const fs::path& out) {
        edit_header(out / "model.safetensors", [](nlohmann::ordered_json& h) {
          auto& t = h["model.layers.1.mlp.up_proj.scales"];
          auto shape = t["shape"];
          std::swap(shape[0], shape[1]);
          t["shape"] = shape;
        });
      },
      "model.layers.1.mlp.up_proj.scales");
  expect_error(
      "missing",
      [](const fs::path& out) {
        edit_header(out / "model.safetensors", [](nlohmann::ordered_json& h) {
          h["model.layers.2.self_attn.out_proj.scale"] = h["model.layers.2.self_attn.out_proj.scales"];
          h.erase("model.layers.2.self_attn.out_proj.scales");
        });
      },
      "model.layers.2.self_attn.out_proj.scale");
  expect_error(
      "format",
      [](const fs::path& out) {
        std::ifstream in(out / "config.json");
        auto cfg = nlohmann::ordered_json::parse(in);
        cfg["quantization_config"]["format"] = "w4a16";  // the tensors are w4a8's
        std::ofstream(out / "config.json") << cfg.dump(2);
      },
      "model.embedding");
}

TEST(QuantizationReport, SnrAndAgreement) {
  const std::vector<float> a = {1, -2, 3, 4}, b = {1.1f, -2, 3, 4};
  EXPECT_TRUE(std::isinf(snr_db(a.data(), a.data(), a.size())));
  EXPECT_NEAR(snr_db(a.data(), b.data(), a.size()), 10 * std::log10(30 / 0.01), 1e-3);
  const std::vector<float> ties = {0, 2, 2, 1};
  EXPECT_EQ(argmax(ties.data(), 4), 1);

  ModelProbe ref{{0, 1, 0, /**/ 1, 0, 0}, {5, 6, 7}}, test{{0, 1, 0, /**/ 0, 0, 1}, {5, 6, 8}};
  const LogitsFidelity f = compare_probes(ref, test, 3);
  EXPECT_EQ(f.positions, 2);
  EXPECT_EQ(f.top1_agree, 1);
  EXPECT_EQ(f.greedy_steps, 3);
  EXPECT_EQ(f.greedy_identical, 2);
}

TEST_F(QuantizedCheckpoint, WeightFidelityRanksTheFormats) {
  auto median_snr = [&](WeightFormat f) {
    SparkModel m(open(*root_ / "tiny"), quantize_to(f), pool_);
    auto w = weight_fidelity(m, pool_);
    EXPECT_EQ(w.size(), m.linear_weights().size());
    std::vector<double> s;
    for (const auto& x : w) s.push_back(x.snr_db);
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  };
  EXPECT_TRUE(std::isinf(median_snr(WeightFormat::kBF16)));  // the checkpoint is bf16: nothing lost
  const double int8 = median_snr(WeightFormat::kInt8), w4a8 = median_snr(WeightFormat::kW4A8),
               w4a16 = median_snr(WeightFormat::kW4A16);
  // int8 rounds to 1/255 of the row range: ~38-40 dB on uniform-ish weights; 4-bit ~16-22 dB.
  EXPECT_GT(int8, 35);
  EXPECT_GT(w4a8, 14);
  EXPECT_GT(w4a16, w4a8);  // asymmetric min/max with a clipping search beats symmetric at the same bits
  EXPECT_GT(int8, w4a16 + 10);
}

}  // namespace

}  // namespace spark
