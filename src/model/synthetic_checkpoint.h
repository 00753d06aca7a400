// Deterministic random-weight checkpoints in exactly the on-disk format of a real Spark-X2.5 folder
// (config.json, bf16/f16/f32 safetensors, optionally sharded with an index, tokenizer.json,
// tokenizer_config.json, generation_config.json). Used by tests, benchmarks and the demo model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace spark {

// The ordinary ways real Hugging Face exports differ from our plain form. None changes the model: the
// same seed gives the same weights, token ids and greedy output in every form.
struct CheckpointForms {
  bool torch_dtype = false;          // config.json says "torch_dtype" (transformers < 4.56), not "dtype"
  bool eos_list = false;             // eos_token_id is a list (config.json and generation_config.json)
  bool generation_defaults = false;  // generation_config.json recommends temperature, top_p, top_k, ...
  bool stored_tied_head = false;     // lm_head.weight stored beside the tied embedding
  bool mixed_dtypes = false;         // norms stored as F32 beside 16-bit matrices
  bool index_metadata = false;       // the shard index carries extra metadata (total_parameters, ...)
  // Where the chat template is: "file" (chat_template.jinja), "config-string" (tokenizer_config.json's
  // chat_template as a string) or "config-list" (a list of {name, template}: default and tool_use).
  std::string chat_template = "file";
};

// Sets the form named `name` (the --form values of spark-make-checkpoint); throws spark::Error listing
// the names for an unknown one.
void set_checkpoint_form(CheckpointForms& forms, const std::string& name);
std::vector<std::string> checkpoint_form_names();

struct SyntheticCheckpointOptions {
  std::string config_json;  // text of a config.json (see configs/)
  uint64_t seed = 1;
  std::string dtype = "BF16";  // BF16, F16 or F32
  int shards = 1;              // > 1 writes model-0000i-of-0000N.safetensors + index
  CheckpointForms forms;
};

// Writes a checkpoint as the Hugging Face hub cache holds a download of `repo_id` ("org/name"):
// <hub_cache>/models--org--name/{blobs/<hash>, snapshots/<revision>/<file> -> ../../blobs/<hash>,
// refs/main}. Returns the snapshot folder.
std::filesystem::path write_synthetic_checkpoint_to_hf_cache(const SyntheticCheckpointOptions& options,
                                                             const std::filesystem::path& hub_cache,
                                                             const std::string& repo_id);

// Writes the folder (created if needed). Values depend only on the seed and the tensor's name and
// shape, so the same seed gives the same weights whatever the sharding or dtype.
void write_synthetic_checkpoint(const SyntheticCheckpointOptions& options, const std::filesystem::path& dir);

// The same model held in memory, for benchmarks at real shapes (the 1.7B is 3.4 GB of bf16): no files
// are written. Weights are filled in parallel with a fast uniform generator of the same scale as the
// file generator's (speed does not depend on the values, only their dtype and shape).
class Checkpoint;
class ThreadPool;
std::shared_ptr<const Checkpoint> make_random_checkpoint(const std::string& config_json, uint64_t seed,
                                                         ThreadPool& pool);

// Names of the configs compiled into the binary (the files under configs/) and their text.
std::vector<std::string> builtin_config_names();
std::string builtin_config(const std::string& name);  // throws spark::Error for an unknown name

// The demo model served when no --model is given: the "demo" config with a fixed seed, generated on
// first use under `cache_dir` and reused afterwards. Returns the folder.
std::filesystem::path ensure_demo_checkpoint(const std::filesystem::path& cache_dir);

}  // namespace spark
