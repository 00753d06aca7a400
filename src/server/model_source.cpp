#include "server/model_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "model/synthetic_checkpoint.h"
#include "spark/error.h"

namespace spark {

namespace {

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("SPARK_CACHE_DIR"); d != nullptr && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d != nullptr && *d)
    return std::filesystem::path(d) / "spark-server";
  if (const char* d = std::getenv("HOME"); d != nullptr && *d)
    return std::filesystem::path(d) / ".cache" / "spark-server";
  return std::filesystem::temp_directory_path() / "spark-server";
}

}  // namespace

std::filesystem::path resolve_model_dir(const std::string& model_dir) {
  if (!model_dir.empty()) return model_dir;
  auto dir = ensure_demo_checkpoint(cache_dir());
  spdlog::warn(
      "no --model given: serving the built-in DEMO checkpoint at {} -- RANDOM WEIGHTS, its output is "
      "meaningless text; pass --model DIR for a real Spark-X2.5 checkpoint",
      dir.string());
  return dir;
}

int64_t resolve_max_model_len(int64_t flag, int64_t max_position_embeddings) {
  if (flag > 0) {
    if (flag > max_position_embeddings) {
      throw Error("--max-model-len " + std::to_string(flag) +
                  " exceeds the model's max_position_embeddings " + std::to_string(max_position_embeddings));
    }
    return flag;
  }
  return std::min<int64_t>(max_position_embeddings, 32768);
}

}  // namespace spark
