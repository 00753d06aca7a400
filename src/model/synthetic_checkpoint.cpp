#include "model/synthetic_checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "chat/default_template.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "spark/error.h"
#include "spark/model_config.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "util/half.h"
#include "util/text_file.h"
#include "util/thread_pool.h"

namespace spark {

const std::map<std::string, std::string>& builtin_config_table();

namespace {

// splitmix64: tiny, portable and fully specified, so a seed means the same weights everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Scales chosen so that random weights behave like a trained model in the ways tests need: sublayers
// change the residual stream by a comparable amount (so every layer matters), and the tied head gives
// peaky logits (a wide gap between the top two tokens, so greedy comparisons are not decided by
// rounding noise).
struct InitRule {
  double mean;
  double std;
};

InitRule init_rule(const std::string& name, const std::vector<int64_t>& shape) {
  const double fan_in = shape.size() > 1 ? static_cast<double>(shape[1]) : 1.0;
  if (name == "model.embedding.weight" || name == "lm_head.weight") return {0.0, 1.0};
  if (name == "model.norm.weight") return {1.0, 0.03};
  if (name.find("layernorm") != std::string::npos) return {1.0, 0.1};
  if (name.find("g_proj") != std::string::npos) return {0.0, 2.0 / std::sqrt(fan_in)};
  // Sublayer outputs 4x a unit-variance projection: large enough that the residual stream is not
  // dominated by the token's own embedding (which would make the tied head repeat the input token).
  if (name.find("down_proj") != std::string::npos || name.find("out_proj") != std::string::npos) {
    return {0.0, 4.0 / std::sqrt(fan_in)};
  }
  return {0.0, 1.0 / std::sqrt(fan_in)};
}

TensorToWrite make_tensor(const std::string& name, const std::vector<int64_t>& shape,
                          const std::string& dtype, uint64_t seed) {
  TensorToWrite t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int elem = dtype == "F32" ? 4 : 2;
  t.bytes.resize(static_cast<size_t>(n * elem));
  Rng rng(seed ^ fnv1a(name));
  const InitRule rule = init_rule(name, shape);
  for (int64_t i = 0; i < n; ++i) {
    // Values are rounded to bf16 first whatever the file dtype, so every dtype stores the same model.
    const float v = bf16_to_f32(f32_to_bf16(static_cast<float>(rule.mean + rule.std * rng.normal())));
    if (dtype == "F32") {
      std::memcpy(t.bytes.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = dtype == "BF16" ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(t.bytes.data() + i * 2, &h, 2);
    }
  }
  return t;
}

std::string shard_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
  return buf;
}

}  // namespace

void write_synthetic_checkpoint(const SyntheticCheckpointOptions& options, const std::filesystem::path& dir) {
  const ModelConfig config = parse_model_config(options.config_json, "synthetic config");
  if (options.dtype != "BF16" && options.dtype != "F16" && options.dtype != "F32") {
    throw Error("synthetic checkpoint: dtype must be BF16, F16 or F32, not " + options.dtype);
  }
  if (options.shards < 1) throw Error("synthetic checkpoint: shards must be >= 1");
  std::filesystem::create_directories(dir);

  const CheckpointForms& forms = options.forms;
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(options.config_json);
  const std::string dtype_name = options.dtype == "BF16"  ? "bfloat16"
                                 : options.dtype == "F16" ? "float16"
                                                          : "float32";
  if (forms.torch_dtype) {
    cfg.erase("dtype");
    cfg["torch_dtype"] = dtype_name;
  } else {
    cfg["dtype"] = dtype_name;
  }
  // The second end token of the list is <|endoftext|> (id 7 in every generated vocabulary).
  const nlohmann::ordered_json eos = forms.eos_list ? nlohmann::ordered_json::array({config.eos_token_id, 7})
                                                    : nlohmann::ordered_json(config.eos_token_id);
  cfg["eos_token_id"] = eos;
  write_text_file(dir / "config.json", cfg.dump(2) + "\n");

  const auto expected = expected_tensors(config);
  const int shards = std::min<int>(options.shards, static_cast<int>(expected.size()));
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total_size = 0;
  // Tensors are generated and written one shard at a time so the generator's memory stays bounded by
  // a shard, not the whole model.
  for (int s = 0; s < shards; ++s) {
    const size_t begin = expected.size() * static_cast<size_t>(s) / static_cast<size_t>(shards);
    const size_t end = expected.size() * static_cast<size_t>(s + 1) / static_cast<size_t>(shards);
    std::vector<TensorToWrite> tensors;
    tensors.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      // Norm weights (1-D) in F32 beside 16-bit matrices: the values are bf16-rounded in every dtype.
      const bool f32 = forms.mixed_dtypes && expected[i].shape.size() == 1;
      tensors.push_back(
          make_tensor(expected[i].name, expected[i].shape, f32 ? "F32" : options.dtype, options.seed));
      if (forms.stored_tied_head && config.tie_word_embeddings &&
          expected[i].name == "model.embedding.weight") {
        TensorToWrite head = tensors.back();
        head.name = "lm_head.weight";
        tensors.push_back(std::move(head));
      }
    }
    std::vector<const TensorToWrite*> ptrs;
    for (const auto& t : tensors) {
      ptrs.push_back(&t);
      total_size += t.bytes.size();
    }
    const std::string file = shards == 1 ? "model.safetensors" : shard_name(s, shards);
    write_safetensors(dir / file, ptrs, {{"format", "pt"}});
    for (const auto& t : tensors) weight_map[t.name] = file;
  }
  if (shards > 1) {
    nlohmann::ordered_json metadata = {{"total_size", total_size}};
    if (forms.index_metadata) {
      // What recent transformers exports add beside total_size.
      metadata["total_parameters"] = total_size / (options.dtype == "F32" ? 4 : 2);
      metadata["format"] = "pt";
    }
    nlohmann::ordered_json index = {{"metadata", metadata}, {"weight_map", weight_map}};
    write_text_file(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  }

  write_text_file(dir / "tokenizer.json", synthetic_tokenizer_json(config.vocab_size, options.seed) + "\n");
  nlohmann::ordered_json tok_cfg = nlohmann::ordered_json::parse(
      synthetic_tokenizer_config_json(config.vocab_size, config.max_position_embeddings));
  const std::string chat_template = spark_default_chat_template();
  if (forms.chat_template == "config-string") {
    tok_cfg["chat_template"] = chat_template;
  } else if (forms.chat_template == "config-list") {
    tok_cfg["chat_template"] =
        nlohmann::ordered_json::array({{{"name", "default"}, {"template", chat_template}},
                                       {{"name", "tool_use"}, {"template", chat_template}}});
  } else {
    write_text_file(dir / "chat_template.jinja", chat_template);
  }
  if (forms.chat_template != "file") {
    // AddedToken objects instead of strings, as older exports write them.
    for (const char* key : {"bos_token", "eos_token", "pad_token"}) {
      tok_cfg[key] = {{"__type", "AddedToken"}, {"content", tok_cfg[key]}, {"lstrip", false},
                      {"normalized", false},    {"rstrip", false},         {"single_word", false}};
    }
  }
  write_text_file(dir / "tokenizer_config.json", tok_cfg.dump(2) + "\n");
  nlohmann::ordered_json gen = {{"bos_token_id", config.bos_token_id},
                                {"eos_token_id", eos},
                                {"pad_token_id", config.pad_token_id},
                                {"do_sample", true}};
  if (forms.generation_defaults) {
    // Recommended values, as model authors publish them; a request that omits a field gets these.
    gen["temperature"] = 0.6;
    gen["top_p"] = 0.95;
    gen["top_k"] = 20;
    gen["min_p"] = 0.05;
    gen["repetition_penalty"] = 1.05;
  }
  write_text_file(dir / "generation_config.json", gen.dump(2) + "\n");
}

void set_checkpoint_form(CheckpointForms& forms, const std::string& name) {
  if (name == "torch-dtype") {
    forms.torch_dtype = true;
  } else if (name == "eos-list") {
    forms.eos_list = true;
  } else if (name == "generation-defaults") {
    forms.generation_defaults = true;
  } else if (name == "stored-tied-head") {
    forms.stored_tied_head = true;
  } else if (name == "mixed-dtypes") {
    forms.mixed_dtypes = true;
  } else if (name == "index-metadata") {
    forms.index_metadata = true;
  } else if (name == "template-string") {
    forms.chat_template = "config-string";
  } else if (name == "template-list") {
    forms.chat_template = "config-list";
  } else {
    std::string known;
    for (const auto& n : checkpoint_form_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown checkpoint form '" + name + "' (known: " + known + ")");
  }
}

std::vector<std::string> checkpoint_form_names() {
  return {"torch-dtype",  "eos-list",       "generation-defaults", "stored-tied-head",
          "mixed-dtypes", "index-metadata", "template-string",     "template-list"};
}

std::filesystem::path write_synthetic_checkpoint_to_hf_cache(const SyntheticCheckpointOptions& options,
                                                             const std::filesystem::path& hub_cache,
                                                             const std::string& repo_id) {
  const size_t slash = repo_id.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == repo_id.size() ||
      repo_id.find('/', slash + 1) != std::string::npos) {
    throw Error("repo id '" + repo_id + "' is not of the form org/name");
  }
  const auto repo_dir =
      hub_cache / ("models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1));
  // The revision is a commit hash in a real cache; any 40 hex digits will do, derived from the seed.
  char revision[48];
  std::snprintf(revision, sizeof revision, "%016llx%016llx%08x",
                static_cast<unsigned long long>(options.seed),
                static_cast<unsigned long long>(fnv1a(repo_id)), 0x5a5a5a5au);
  const auto staging = repo_dir / "staging";
  std::filesystem::remove_all(staging);
  write_synthetic_checkpoint(options, staging);
  const auto snapshot = repo_dir / "snapshots" / revision;
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directories(repo_dir / "blobs");
  for (const auto& entry : std::filesystem::directory_iterator(staging)) {
    // Blobs are named by a hash of their content (sha256 in a real cache; any content hash serves here).
    const std::string bytes = read_text_file(entry.path());
    char blob[40];
    std::snprintf(blob, sizeof blob, "%016llx%08zx", static_cast<unsigned long long>(fnv1a(bytes)),
                  bytes.size());
    std::filesystem::rename(entry.path(), repo_dir / "blobs" / blob);
    const auto link = snapshot / entry.path().filename();
    std::filesystem::remove(link);
    std::filesystem::create_symlink(std::filesystem::path("..") / ".." / "blobs" / blob, link);
  }
  std::filesystem::remove_all(staging);
  std::filesystem::create_directories(repo_dir / "refs");
  write_text_file(repo_dir / "refs" / "main", revision);
  return snapshot;
}

std::shared_ptr<const Checkpoint> make_random_checkpoint(const std::string& config_json, uint64_t seed,
                                                         ThreadPool& pool) {
  ModelConfig config = parse_model_config(config_json, "random-weights config");
  std::vector<Checkpoint::MemoryTensor> tensors;
  for (const ExpectedTensor& e : expected_tensors(config)) {
    Checkpoint::MemoryTensor t{e.name, "BF16", e.shape, {}};
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    t.bytes.resize(static_cast<size_t>(n * 2));
    const InitRule rule = init_rule(e.name, e.shape);
    // Uniform on [-a, a] has std a / sqrt(3).
    const float a = static_cast<float>(rule.std * std::sqrt(3.0));
    const float mean = static_cast<float>(rule.mean);
    auto* out = reinterpret_cast<uint16_t*>(t.bytes.data());
    const uint64_t base = seed ^ fnv1a(e.name);
    constexpr int64_t kChunk = 1 << 16;
    pool.parallel_for(static_cast<size_t>((n + kChunk - 1) / kChunk), 1, [&](size_t begin, size_t end) {
      for (size_t c = begin; c < end; ++c) {
        Rng rng(base + c * 0x9e3779b97f4a7c15ULL);
        const int64_t lo = static_cast<int64_t>(c) * kChunk, hi = std::min(n, lo + kChunk);
        for (int64_t i = lo; i < hi; ++i) {
          const float u = static_cast<float>(static_cast<double>(rng.next() >> 40) * (1.0 / 16777216.0));
          out[i] = f32_to_bf16(mean + a * (2.0f * u - 1.0f));
        }
      }
    });
    tensors.push_back(std::move(t));
  }
  return std::make_shared<const Checkpoint>(std::move(config), std::move(tensors));
}

std::vector<std::string> builtin_config_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : builtin_config_table()) names.push_back(name);
  return names;
}

std::string builtin_config(const std::string& name) {
  const auto& table = builtin_config_table();
  auto it = table.find(name);
  if (it == table.end()) {
    std::string known;
    for (const auto& [n, _] : table) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown built-in config '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

// The folder name carries a format version: a generator change that alters the files bumps it.
constexpr const char* kDemoName = "demo-v3";

std::filesystem::path ensure_demo_checkpoint(const std::filesystem::path& cache_dir) {
  const auto dir = cache_dir / kDemoName;
  if (std::filesystem::exists(dir / "model.safetensors") && std::filesystem::exists(dir / "tokenizer.json"))
    return dir;
  const auto tmp = cache_dir / (std::string(kDemoName) + ".tmp" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  write_synthetic_checkpoint({builtin_config("demo"), 20261130, "BF16", 1, {}}, tmp);
  std::filesystem::remove_all(dir);
  std::filesystem::rename(tmp, dir);  // atomic: a concurrent start sees either nothing or a whole folder
  return dir;
}

}  // namespace spark
