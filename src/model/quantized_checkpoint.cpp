#include "model/quantized_checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "spark/error.h"
#include "util/text_file.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// A run killed outright (SIGKILL, power loss) leaves its staging folder; the output folder itself is only
// ever renamed into place whole. The next run for the same output removes stagings whose process is gone.
void remove_stale_stages(const fs::path& parent, const std::string& out_name) {
  std::error_code ec;
  const std::string prefix = out_name + ".partial-";
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
}

bool is_weight_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return p.extension() == ".safetensors" || name == "model.safetensors.index.json" || name == "config.json";
}

// The tensors of the output, in the source's order: packed parts in place of each linear weight.
std::vector<TensorBytesView> output_tensors(const SparkModel& model) {
  std::map<std::string, const kernels::QuantizedWeight*> linear;
  for (const auto& [prefix, w] : model.linear_weights()) linear[prefix] = w;
  const Checkpoint& ck = model.checkpoint();
  std::vector<TensorBytesView> out;
  for (const ExpectedTensor& e : expected_tensors(model.config())) {
    if (e.linear) {
      auto it = linear.find(e.prefix());
      if (it == linear.end()) throw Error("internal: no quantized weight for " + e.name);
      for (const kernels::PackedTensor& p : kernels::packed_tensors(*it->second)) {
        out.push_back(
            {e.prefix() + "." + p.name, kernels::tensor_dtype_name(p.dtype), p.shape, p.data, p.bytes});
      }
    } else {
      const TensorInfo& t = ck.tensor(e.name);
      out.push_back({e.name, t.dtype, t.shape, t.data, static_cast<size_t>(t.nbytes)});
    }
  }
  return out;
}

std::string shard_file_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

}  // namespace

void check_quantized_output(const fs::path& out, const fs::path& source) {
  std::error_code ec;
  if (fs::exists(out) && fs::equivalent(out, source, ec))
    throw Error(out.string() + ": is the source folder");
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out, ec))) {
    throw Error(out.string() + ": already exists and is not an empty folder (choose another --out)");
  }
}

QuantizedCheckpointSummary write_quantized_checkpoint(const SparkModel& model, const fs::path& out,
                                                      uint64_t max_shard_bytes) {
  const Checkpoint& ck = model.checkpoint();
  const kernels::WeightFormat format = model.weight_format();
  if (kernels::is_float_format(format)) {
    throw Error(std::string("spark-quantize writes int8, w4a8 or w4a16, not ") +
                kernels::weight_format_name(format) + " (a float checkpoint needs no packing)");
  }
  if (ck.in_memory())
    throw Error("a pre-quantized checkpoint is written from a checkpoint folder, not random weights");
  if (!model.config().quant_format.empty()) throw Error(ck.dir().string() + ": already pre-quantized");
  check_quantized_output(out, ck.dir());
  std::error_code ec;
  if (max_shard_bytes == 0) throw Error("shard size must be positive");

  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const fs::path stage = parent / (out.filename().string() + ".partial-" + std::to_string(::getpid()));
  remove_stale_stages(parent, out.filename().string());
  fs::remove_all(stage);
  fs::create_directories(stage);
  try {
    // config.json: the source's, as written, plus what a loader needs to map the packed tensors.
    nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(read_text_file(ck.dir() / "config.json"));
    cfg["quantization_config"] = {{"quant_method", "spark"},
                                  {"format", kernels::weight_format_name(format)},
                                  {"layout_version", kernels::kLayoutVersion},
                                  {"group_size", kernels::kGroupSize},
                                  {"block_rows", kernels::kBlockRows}};
    write_text_file(stage / "config.json", cfg.dump(2) + "\n");

    // Shards: consecutive tensors up to max_shard_bytes each.
    const std::vector<TensorBytesView> tensors = output_tensors(model);
    std::vector<std::vector<TensorBytesView>> shards(1);
    uint64_t in_shard = 0, total = 0;
    for (const TensorBytesView& t : tensors) {
      if (!shards.back().empty() && in_shard + t.bytes > max_shard_bytes) {
        shards.emplace_back();
        in_shard = 0;
      }
      shards.back().push_back(t);
      in_shard += t.bytes;
      total += t.bytes;
    }
    QuantizedCheckpointSummary summary;
    summary.tensor_bytes = total;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    const std::map<std::string, std::string> metadata = {
        {"format", "pt"}, {"spark_quant", kernels::weight_format_name(format)}};
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file = shards.size() == 1 ? "model.safetensors" : shard_file_name(s, shards.size());
      write_safetensors(stage / file, shards[s], metadata);
      for (const TensorBytesView& t : shards[s]) weight_map[t.name] = file;
      summary.files.push_back(file);
    }
    if (shards.size() > 1) {
      nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
      write_text_file(stage / "model.safetensors.index.json", index.dump(2) + "\n");
    }

    // Everything else a server needs from the folder (tokenizer, chat template, generation config).
    for (const fs::directory_entry& entry : fs::directory_iterator(ck.dir())) {
      if (!entry.is_regular_file() || is_weight_file(entry.path())) continue;
      fs::copy_file(entry.path(), stage / entry.path().filename());
    }

    if (fs::exists(out)) fs::remove(out);  // an empty folder, checked above
    fs::rename(stage, out);
    return summary;
  } catch (...) {
    fs::remove_all(stage, ec);
    throw;
  }
}

}  // namespace spark
