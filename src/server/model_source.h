// Where a command's model comes from: --model DIR, or the built-in demo checkpoint (random weights).
#pragma once

#include <filesystem>
#include <string>

namespace spark {

// Returns the checkpoint folder to load: `model_dir` if given, else the demo folder (generated on first
// use in $SPARK_CACHE_DIR, $XDG_CACHE_HOME/spark-server or ~/.cache/spark-server), logging loudly that
// its weights are random.
std::filesystem::path resolve_model_dir(const std::string& model_dir);

// max_model_len to use: the flag when set (> 0), else the model's limit capped at 32768 positions so
// RoPE tables and KV budgets stay sized for what is really served.
int64_t resolve_max_model_len(int64_t flag, int64_t max_position_embeddings);

}  // namespace spark
