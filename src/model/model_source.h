// Where a command's model comes from: --model DIR, or the built-in demo checkpoint (random weights).
#pragma once

#include <filesystem>
#include <string>

namespace spark {

// Returns the checkpoint folder to load: `model_dir` if it is a folder; a Hugging Face repo id ("org/name")
// resolved offline in the local hub cache (see resolve_hf_repo_id); else the demo folder (generated on first
// use in $SPARK_CACHE_DIR, $XDG_CACHE_HOME/spark-server or ~/.cache/spark-server), logging loudly that
// its weights are random.
std::filesystem::path resolve_model_dir(const std::string& model_dir);

// The snapshot folder of `repo_id` in a Hugging Face hub cache (models--org--name/snapshots/<rev>, the
// revision named by refs/main), as transformers finds it with HF_HUB_OFFLINE=1. Throws spark::Error saying
// where it looked when the repo is not there; nothing is downloaded.
std::filesystem::path resolve_hf_repo_id(const std::string& repo_id, const std::filesystem::path& hub_cache);

// max_model_len to use: the flag when set (> 0), else the model's limit capped at 32768 positions so
// RoPE tables and KV budgets stay sized for what is really served.
int64_t resolve_max_model_len(int64_t flag, int64_t max_position_embeddings);

}  // namespace spark
