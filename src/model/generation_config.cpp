#include "model/generation_config.h"

#include <cmath>

#include "spark/error.h"
#include "util/bounded_json.h"
#include "util/text_file.h"

namespace spark {

namespace {

using nlohmann::json;

std::optional<double> number(const json& j, const char* key, double lo, double hi,
                             const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < lo ||
      it->get<double>() > hi) {
    throw Error(source + ": " + key + ": must be a number in [" + json(lo).dump() + ", " + json(hi).dump() +
                "], got " + it->dump());
  }
  return it->get<double>();
}

std::optional<int> integer(const json& j, const char* key, int64_t lo, int64_t hi,
                           const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    throw Error(source + ": " + key + ": must be an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "], got " + it->dump());
  }
  return static_cast<int>(it->get<int64_t>());
}

}  // namespace

nlohmann::ordered_json GenerationConfig::sampling_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (temperature) j["temperature"] = *temperature;
  if (top_p) j["top_p"] = *top_p;
  if (top_k) j["top_k"] = *top_k;
  if (min_p) j["min_p"] = *min_p;
  if (repetition_penalty) j["repetition_penalty"] = *repetition_penalty;
  if (max_new_tokens) j["max_tokens"] = *max_new_tokens;
  return j;
}

GenerationConfig parse_generation_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = parse_json_bounded(json_text);
  } catch (const json::exception& e) {  // parse_error (too deep included), out_of_range for 1e999
    throw Error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(source + ": top level must be a JSON object");
  GenerationConfig g;
  // The ranges the request parser accepts for the same fields.
  g.temperature = number(j, "temperature", 0.0, 2.0, source);
  g.top_p = number(j, "top_p", 0.0, 1.0, source);
  if (g.top_p && *g.top_p <= 0.0) throw Error(source + ": top_p: must be greater than 0");
  g.top_k = integer(j, "top_k", -1, 1 << 20, source);
  if (g.top_k && *g.top_k < 0) g.top_k = 0;  // -1 disables, as 0 does
  g.min_p = number(j, "min_p", 0.0, 1.0, source);
  g.repetition_penalty = number(j, "repetition_penalty", 0.01, 10.0, source);
  g.max_new_tokens = integer(j, "max_new_tokens", 1, 1 << 24, source);
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    const json list = it->is_array() ? *it : json::array({*it});
    for (const json& id : list) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        throw Error(source + ": eos_token_id: must be a token id or a list of token ids, got " + it->dump());
      }
      g.eos_token_ids.push_back(id.get<int32_t>());
    }
  }
  return g;
}

GenerationConfig load_generation_config(const std::filesystem::path& dir) {
  const auto path = dir / "generation_config.json";
  if (!std::filesystem::exists(path)) return {};
  return parse_generation_config(read_text_file(path), path.string());
}

}  // namespace spark
