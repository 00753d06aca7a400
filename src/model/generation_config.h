// A checkpoint's generation_config.json: the sampling values its authors recommend and its extra end
// tokens. The server applies them as vLLM does by default (--generation-config auto): each becomes the
// default for requests that omit that field, and its eos ids join the stop set.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace spark {

struct GenerationConfig {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int> max_new_tokens;  // the default max_tokens
  std::vector<int32_t> eos_token_ids;

  // The sampling defaults in force, as {"temperature": 0.6, ...} (empty object when none).
  nlohmann::ordered_json sampling_json() const;
};

// Parses generation_config.json text; `source` names the file in errors. Values of the wrong type or out
// of range are a spark::Error; keys that do not set sampling defaults (do_sample, bos ids...) are ignored.
GenerationConfig parse_generation_config(const std::string& json_text, const std::string& source);
// <dir>/generation_config.json, or an empty config when the folder has none.
GenerationConfig load_generation_config(const std::filesystem::path& dir);

}  // namespace spark
