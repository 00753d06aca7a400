#include "model/model_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "model/synthetic_checkpoint.h"
#include "spark/error.h"
#include "util/text_file.h"

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

// The Hugging Face hub cache, as huggingface_hub finds it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::filesystem::path hf_hub_cache() {
  if (const char* d = std::getenv("HF_HUB_CACHE"); d != nullptr && *d) return d;
  if (const char* d = std::getenv("HF_HOME"); d != nullptr && *d) return std::filesystem::path(d) / "hub";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d != nullptr && *d)
    return std::filesystem::path(d) / "huggingface" / "hub";
  if (const char* d = std::getenv("HOME"); d != nullptr && *d)
    return std::filesystem::path(d) / ".cache" / "huggingface" / "hub";
  return std::filesystem::path(".cache") / "huggingface" / "hub";
}

// "org/name" as Hugging Face names repositories: two non-empty parts of [A-Za-z0-9._-], not starting
// with a dot (so "./x" and "../x" stay paths).
bool looks_like_repo_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() ||
      s.find('/', slash + 1) != std::string::npos)
    return false;
  if (s[0] == '.' || s[slash + 1] == '.') return false;
  for (char c : s) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::filesystem::path resolve_hf_repo_id(const std::string& repo_id, const std::filesystem::path& hub_cache) {
  const size_t slash = repo_id.find('/');
  const auto repo_dir =
      hub_cache / ("models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1));
  const auto not_cached = [&](const std::string& why) {
    return Error("--model " + repo_id + ": not a folder, and not in the Hugging Face cache (" + why +
                 "); nothing is downloaded: fetch it with `huggingface-cli download " + repo_id +
                 "` or pass a folder");
  };
  if (!std::filesystem::is_directory(repo_dir)) throw not_cached("looked in " + repo_dir.string());
  std::string revision;
  const auto ref = repo_dir / "refs" / "main";
  if (std::filesystem::exists(ref)) {
    revision = read_text_file(ref);
    while (!revision.empty() && std::isspace(static_cast<unsigned char>(revision.back())))
      revision.pop_back();
  } else {
    // No refs/main (a snapshot downloaded by revision): take the only snapshot, if there is one.
    std::vector<std::filesystem::path> snapshots;
    if (std::filesystem::is_directory(repo_dir / "snapshots")) {
      for (const auto& e : std::filesystem::directory_iterator(repo_dir / "snapshots"))
        snapshots.push_back(e.path());
    }
    if (snapshots.size() != 1) {
      throw not_cached(repo_dir.string() + " has no refs/main and " + std::to_string(snapshots.size()) +
                       " snapshots");
    }
    revision = snapshots[0].filename().string();
  }
  if (revision.empty() || revision.find('/') != std::string::npos ||
      revision.find("..") != std::string::npos) {
    throw not_cached(ref.string() + " does not name a revision");
  }
  const auto snapshot = repo_dir / "snapshots" / revision;
  if (!std::filesystem::exists(snapshot / "config.json")) {
    throw not_cached("looked in " + snapshot.string() + ", which has no config.json");
  }
  return snapshot;
}

std::filesystem::path resolve_model_dir(const std::string& model_dir) {
  if (!model_dir.empty()) {
    if (std::filesystem::is_directory(model_dir) || !looks_like_repo_id(model_dir)) return model_dir;
    const auto snapshot = resolve_hf_repo_id(model_dir, hf_hub_cache());
    spdlog::info("--model {}: the Hugging Face cache's snapshot {}", model_dir, snapshot.string());
    return snapshot;
  }
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
