#include "model/checkpoint.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "spark/error.h"
#include "util/bounded_json.h"

namespace spark {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::map<std::string, std::string> read_index(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot read");
  nlohmann::json j;
  try {
    j = parse_json_bounded(std::string(std::istreambuf_iterator<char>(in), {}));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw Error(path.string() + ": missing weight_map object");
  }
  std::map<std::string, std::string> map;
  for (auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw Error(path.string() + ": weight_map." + name + " is not a file name");
    std::string f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) {
      throw Error(path.string() + ": weight_map." + name + " names a file outside the folder: " + f);
    }
    map[name] = f;
  }
  return map;
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embedding.weight", {c.vocab_size, h}, true});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_k_v_proj.weight", {c.qkv_dim(), h}, true});
    out.push_back({p + "self_attn.g_proj.weight", {c.num_heads, h}});
    out.push_back({p + "self_attn.out_proj.weight", {h, c.q_dim()}, true});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "mlp.gate_proj.weight", {inter, h}, true});
    out.push_back({p + "mlp.up_proj.weight", {inter, h}, true});
    out.push_back({p + "mlp.down_proj.weight", {h, inter}, true});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}, true});
  return out;
}

Checkpoint::Checkpoint(const std::filesystem::path& dir) : dir_(dir) {
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + ": not a checkpoint folder");
  config_ = load_model_config(dir / "config.json");

  const auto index_path = dir / "model.safetensors.index.json";
  const auto single_path = dir / "model.safetensors";
  std::map<std::string, std::string> index;  // tensor -> file, for sharded checkpoints
  if (std::filesystem::exists(index_path)) {
    index = read_index(index_path);
    std::set<std::string> shard_names;
    for (auto& [_, f] : index) shard_names.insert(f);
    for (const std::string& f : shard_names) {
      if (!std::filesystem::exists(dir / f))
        throw Error((dir / f).string() + ": shard listed in the index is missing");
      files_.push_back(std::make_unique<SafetensorsFile>(dir / f));
    }
  } else if (std::filesystem::exists(single_path)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single_path));
  } else {
    throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }

  for (const auto& file : files_) {
    const std::string fname = file->path().filename().string();
    for (const auto& [name, info] : file->tensors()) {
      if (!index.empty()) {
        auto it = index.find(name);
        if (it == index.end()) {
          throw Error(file->path().string() + ": tensor " + name +
                      " is not listed in model.safetensors.index.json");
        }
        if (it->second != fname) {
          throw Error(file->path().string() + ": tensor " + name + " is indexed in " + it->second);
        }
      }
      if (!tensors_.emplace(name, &info).second) {
        throw Error(file->path().string() + ": tensor " + name + " appears in more than one shard");
      }
    }
  }
  for (const auto& [name, f] : index) {
    if (!tensors_.count(name))
      throw Error((dir / f).string() + ": tensor " + name + " listed in the index is missing");
  }

  std::set<std::string> expected_names;
  const bool packed = !config_.quant_format.empty();
  for (const ExpectedTensor& e : expected_tensors(config_)) {
    if (packed && e.linear) {
      // Packed tensors: their presence here, their dtypes and shapes when the model views them.
      for (const char* suffix : {".qweight", ".scales", ".row_sums", ".params"})
        expected_names.insert(e.prefix() + suffix);
      if (!tensors_.count(e.prefix() + ".qweight")) {
        throw Error((index.empty() ? single_path : index_path).string() + ": missing tensor " + e.prefix() +
                    ".qweight");
      }
      continue;
    }
    expected_names.insert(e.name);
    auto it = tensors_.find(e.name);
    if (it == tensors_.end()) {
      std::string where = index.empty() ? single_path.string() : index_path.string();
      throw Error(where + ": missing tensor " + e.name);
    }
    const TensorInfo& t = *it->second;
    const std::string where = (dir / t.file).string() + ": tensor " + e.name;
    if (t.shape != e.shape)
      throw Error(where + ": shape " + shape_str(t.shape) + ", expected " + shape_str(e.shape));
    if (t.dtype != "BF16" && t.dtype != "F16" && t.dtype != "F32") {
      throw Error(where + ": dtype " + t.dtype + " is not supported (expected BF16, F16 or F32)");
    }
  }
  // A tied model whose export also stored the head (transformers saves it when the tie is broken at save
  // time): transformers ignores it under tie_word_embeddings, and so do we, once its shape is checked.
  if (config_.tie_word_embeddings && !packed) {
    if (auto it = tensors_.find("lm_head.weight"); it != tensors_.end()) {
      const TensorInfo& head = *it->second;
      const std::vector<int64_t> want = {config_.vocab_size, config_.hidden_size};
      if (head.shape != want) {
        throw Error((dir / head.file).string() + ": tensor lm_head.weight: shape " + shape_str(head.shape) +
                    ", expected " + shape_str(want) + " (the tied embedding's)");
      }
      spdlog::info(
          "{}: lm_head.weight is stored but tie_word_embeddings is true: the embedding is used as "
          "the head and the stored copy is ignored",
          (dir / head.file).string());
      expected_names.insert("lm_head.weight");
    }
  }
  for (const auto& [name, t] : tensors_) {
    if (!expected_names.count(name)) {
      throw Error((dir / t->file).string() + ": unexpected tensor " + name + " (not part of a " +
                  config_.model_type + " model with this config)");
    }
  }
}

Checkpoint::Checkpoint(ModelConfig config, std::vector<MemoryTensor> tensors)
    : dir_("<memory>"), config_(std::move(config)), memory_(std::move(tensors)) {
  for (const MemoryTensor& m : memory_) {
    TensorInfo t;
    t.name = m.name;
    t.dtype = m.dtype;
    t.shape = m.shape;
    t.data = m.bytes.data();
    t.nbytes = m.bytes.size();
    t.file = "<memory>";
    if (static_cast<uint64_t>(t.numel() * safetensors_dtype_size(t.dtype)) != t.nbytes) {
      throw Error("in-memory tensor " + t.name + ": byte size does not match shape and dtype");
    }
    tensors_[m.name] = &memory_infos_.emplace(m.name, t).first->second;
  }
  for (const ExpectedTensor& e : expected_tensors(config_)) {
    auto it = tensors_.find(e.name);
    if (it == tensors_.end()) throw Error("in-memory checkpoint: missing tensor " + e.name);
    if (it->second->shape != e.shape)
      throw Error("in-memory checkpoint: tensor " + e.name + " has the wrong shape");
  }
}

const TensorInfo& Checkpoint::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(dir_.string() + ": missing tensor " + name);
  return *it->second;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (auto& [_, t] : tensors_) n += t->nbytes;
  return n;
}

}  // namespace spark
