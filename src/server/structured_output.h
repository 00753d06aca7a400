// Structured outputs from a request: OpenAI's response_format ({"type": "json_object"} or {"type":
// "json_schema", "json_schema": {"name", "schema", "strict"}}) and vLLM's structured_outputs {"json" |
// "regex" | "choice"} with its older guided_json / guided_regex / guided_choice. Compiled by the grammar
// engine (src/grammar) into a grammar for the server's vocabulary; compiled grammars are cached by their
// spec.
#pragma once

#include <cstddef>
#include <cstdint>
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

// The process-wide cache of compiled grammars (structured outputs and tool calls alike).
inline constexpr size_t kDefaultGrammarCacheCount = 64;
inline constexpr size_t kDefaultGrammarCacheBytes = size_t{256} << 20;
struct GrammarCacheStats {
  size_t grammars = 0;
  size_t bytes = 0;  // as measured before the last insertion
  size_t refusals = 0;                    // refused specs kept (answered again without a compile)
  size_t compiles_waiting_for_equal = 0;  // requests waiting for another's compile of their spec
  uint64_t compiles = 0;                  // grammar builds started since the process began
};
GrammarCacheStats grammar_cache_stats();
void set_grammar_cache_limits(size_t max_grammars, size_t max_bytes);

// Grammar compiles run on the request's thread before it queues (a large schema takes seconds of a core):
// at most o.max_grammar_compiles at once and 4 times as many in line, running and waiting together at most
// half the HTTP workers; a request past both is a 429. A cached grammar passes without waiting. Until this
// is called the limits are those of default ServerOptions.
struct ServerOptions;
inline constexpr size_t kGrammarCompileQueuePerPlace = 4;
size_t default_grammar_compiles();
void set_grammar_compile_limits(const ServerOptions& o);

// The compiled grammar (cached). A schema keyword or regex syntax the engine cannot enforce: ApiError 400
// naming it.
std::shared_ptr<const grammar::CompiledGrammar> compile_structured_output(
    const StructuredOutput& so, const std::shared_ptr<const grammar::TokenVocab>& vocab);

// The tool-call grammar (cached) for a request's OpenAI `tools`: with `forced` (tool_choice "required", or
// `forced_name` for a named function) the output is the call(s) alone, every tool's arguments held to its
// schema; otherwise (tool_choice "auto") text is free until `<tool_call>`, strict tools' arguments are held
// to their schemas and other tools' calls only to the syntax, and null comes back when no tool is strict.
// `parallel` false: one call at most. A schema the engine cannot enforce: ApiError 400 naming it.
std::shared_ptr<const grammar::CompiledGrammar> compile_tool_call_grammar(
    const nlohmann::ordered_json& tools, bool forced, const std::string& forced_name, bool parallel,
    const std::shared_ptr<const grammar::TokenVocab>& vocab);

}  // namespace spark
