// Pre-quantized checkpoints (what spark-quantize writes): the linear layers as the kernels' packed
// tensors (kernels/gemm/weight.h), every other tensor exactly as the source stores it, and a
// config.json whose quantization_config names the format and the packed layout version. Loading one
// maps the packed tensors in place: no conversion, no second copy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/spark_model.h"

namespace spark {

struct QuantizedCheckpointSummary {
  std::vector<std::string> files;  // safetensors files written, in order
  uint64_t tensor_bytes = 0;       // bytes of tensor data over all files
};

// Writes `model` (loaded from a float checkpoint folder and quantized at load to int8, w4a8 or w4a16)
// as a checkpoint folder `out`. Files of the source folder other than config.json and the weights
// (tokenizer, chat template, generation config) are copied. Weights go in shards of at most
// `max_shard_bytes` (a tensor larger than that gets a shard of its own). The folder is assembled
// beside `out` and renamed into place at the end, so a failure never leaves a half-written `out`;
// `out` must not exist or be an empty folder.
QuantizedCheckpointSummary write_quantized_checkpoint(const SparkModel& model,
                                                      const std::filesystem::path& out,
                                                      uint64_t max_shard_bytes = uint64_t{4} << 30);

// Throws unless `out` is free for write_quantized_checkpoint (absent or an empty folder, not `source`):
// checked again by the writer, and first by a caller so it fails before spending time quantizing.
void check_quantized_output(const std::filesystem::path& out, const std::filesystem::path& source);

}  // namespace spark
