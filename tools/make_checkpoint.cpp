// spark-make-checkpoint: writes a deterministic random-weight checkpoint folder in the real on-disk
// format, from a built-in config (configs/*.json) or any config.json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/synthetic_checkpoint.h"
#include "spark/error.h"
#include "tokenizer/tokenizer_variants.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "util/text_file.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a random-weight Spark-X2.5 checkpoint folder"};
  std::string preset, config_path, out, dtype = "bf16";
  uint64_t seed = 1;
  int shards = 1;
  app.add_option(
      "--preset", preset, "Built-in config name (" + [] {
        std::string s;
        for (const auto& n : spark::builtin_config_names()) s += (s.empty() ? "" : ", ") + n;
        return s;
      }() + ")");
  app.add_option("--config", config_path, "A config.json to take the shapes from");
  app.add_option("--seed", seed, "Random seed");
  app.add_option("--dtype", dtype, "Tensor dtype: bf16, f16 or f32")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  app.add_option("--shards", shards, "Number of safetensors shards")->check(CLI::Range(1, 1000));
  std::vector<std::string> forms;
  app.add_option(
      "--form", forms, "A form real exports take (repeatable): " + [] {
        std::string s;
        for (const auto& n : spark::checkpoint_form_names()) s += (s.empty() ? "" : ", ") + n;
        return s;
      }());
  std::string repo_id;
  app.add_option("--hf-repo-id", repo_id,
                 "Write as the Hugging Face hub cache holds a download of this repo (org/name); --out is "
                 "then the hub cache folder ($HF_HOME/hub)");
  bool tokenizer_only = false;
  app.add_flag("--tokenizer-only", tokenizer_only,
               "Write only tokenizer.json and tokenizer_config.json for the config's vocabulary (no weights)");
  app.add_option("-o,--out", out, "Output folder")->required();
  std::string tokenizer_variant = "default";
  app.add_option("--tokenizer-variant", tokenizer_variant, "Form of tokenizer.json (same vocabulary and ids)")
      ->check(CLI::IsMember(spark::tokenizer_variant_names()));
  CLI11_PARSE(app, argc, argv);
  try {
    const std::string config_text = !config_path.empty()
                                        ? spark::read_text_file(config_path)
                                        : spark::builtin_config(preset.empty() ? "tiny" : preset);
    if (tokenizer_only) {  // e.g. a 131072-entry vocabulary without its 3.4 GB of weights
      const auto config = nlohmann::json::parse(config_text);
      const int vocab = config.at("vocab_size").get<int>();
      std::filesystem::create_directories(out);
      spark::write_text_file(std::filesystem::path(out) / "tokenizer.json", spark::synthetic_tokenizer_json(vocab, seed) + "\n");
      spark::write_text_file(std::filesystem::path(out) / "tokenizer_config.json",
                             spark::synthetic_tokenizer_config_json(vocab, config.value("max_position_embeddings", 4096)) + "\n");
      return 0;
    }
    std::string upper = dtype == "bf16" ? "BF16" : dtype == "f16" ? "F16" : "F32";
    spark::SyntheticCheckpointOptions options{config_text, seed, upper, shards, {}};
    for (const auto& f : forms) spark::set_checkpoint_form(options.forms, f);
    if (!repo_id.empty()) {
      if (tokenizer_variant != "default")
        throw spark::Error("--tokenizer-variant is not available with --hf-repo-id");
      std::printf("%s\n", spark::write_synthetic_checkpoint_to_hf_cache(options, out, repo_id).c_str());
    } else {
      spark::write_synthetic_checkpoint(options, out);
      if (tokenizer_variant != "default") spark::write_tokenizer_variant(out, tokenizer_variant);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
