// Structured outputs from a request: OpenAI's response_format ({"type": "json_object"} or {"type":
// "json_schema", "json_schema": {"name", "schema", "strict"}}) and vLLM's structured_outputs {"json" |
// "regex" | "choice"} with its older guided_json / guided_regex / guided_choice. Compiled by the grammar
// engine (src/grammar) into a grammar for the server's vocabulary; compiled grammars are cached by their
// spec.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace spark {

struct StructuredOutput {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice } kind = Kind::kJsonObject;
  std::string spec;                  // the schema's JSON text (key order kept) or the regex
  std::vector<std::string> choices;  // kChoice
  std::string param;                 // the request field it came from, for errors
};

// Null when the request asks for none. Malformed fields, or two ways of asking at once: ApiError 400.
std::optional<StructuredOutput> parse_structured_output(const nlohmann::ordered_json& body);

// The compiled grammar (cached). A schema keyword or regex syntax the engine cannot enforce: ApiError 400
// naming it.
std::shared_ptr<const grammar::CompiledGrammar> compile_structured_output(
    const StructuredOutput& so, const std::shared_ptr<const grammar::TokenVocab>& vocab);

}  // namespace spark
