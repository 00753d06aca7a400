// A Hugging Face checkpoint folder: config.json plus model.safetensors or a sharded set described by
// model.safetensors.index.json. Opening it validates everything a forward pass will rely on: every
// expected tensor present exactly once, with its shape and a float dtype, and nothing unexpected.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "spark/model_config.h"

namespace spark {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  // A linear weight ("<prefix>.weight"): in a pre-quantized checkpoint it is stored as packed tensors
  // "<prefix>.qweight" etc., whose dtypes and shapes the kernels' layout defines.
  bool linear = false;
  std::string prefix() const { return name.substr(0, name.size() - 7); }
};

// The tensors a Spark checkpoint must contain for this config, in file order.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

class Checkpoint {
 public:
  explicit Checkpoint(const std::filesystem::path& dir);
  // A checkpoint held in memory (random weights for benchmarks at real shapes, no files). Each tensor's
  // bytes are owned by the checkpoint; the set must match expected_tensors(config).
  struct MemoryTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  Checkpoint(ModelConfig config, std::vector<MemoryTensor> tensors);

  const std::filesystem::path& dir() const { return dir_; }
  bool in_memory() const { return !memory_.empty(); }
  const ModelConfig& config() const { return config_; }
  // Throws if the tensor is absent; open() already guaranteed every expected tensor is here.
  const TensorInfo& tensor(const std::string& name) const;
  bool has_tensor(const std::string& name) const { return tensors_.count(name) != 0; }
  uint64_t total_bytes() const;

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<MemoryTensor> memory_;
  std::map<std::string, TensorInfo> memory_infos_;
  std::map<std::string, const TensorInfo*> tensors_;
};

}  // namespace spark
