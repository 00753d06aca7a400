#include "server/structured_output.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/tool_call.h"
#include "server/api_error.h"
#include "server/request_fields.h"
#include "server/server_context.h"
#include "spark/error.h"
#include "util/admission_gate.h"
#include "util/bounded_json.h"
#include "util/lru_cache.h"
#include "util/single_flight.h"

namespace spark {

namespace {

using ordered_json = nlohmann::ordered_json;

using request_fields::bad;
using request_fields::field;

StructuredOutput from_schema(const ordered_json& schema, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean()) bad(param, "must be a JSON Schema (an object)");
  return {StructuredOutput::Kind::kJsonSchema, schema.dump(), {}, param};
}

// vLLM's guided_json and structured_outputs.json take the schema as an object or as JSON text. The text is
// parsed bounded (a string of 100 000 nested objects overflowed the stack when the schema was dumped).
StructuredOutput from_schema_field(const ordered_json& v, const std::string& param) {
  if (!v.is_string()) return from_schema(v, param);
  const ordered_json schema = parse_json_bounded_or_discarded<ordered_json>(v.get_ref<const std::string&>());
  if (schema.is_discarded()) {
    bad(param, "is not JSON, or nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  return from_schema(schema, param);
}

StructuredOutput from_regex(const ordered_json& v, const std::string& param) {
  if (!v.is_string()) bad(param, "must be a string (a regular expression)");
  return {StructuredOutput::Kind::kRegex, v.get<std::string>(), {}, param};
}

StructuredOutput from_choice(const ordered_json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) bad(param, "must be a non-empty list of strings");
  StructuredOutput so{StructuredOutput::Kind::kChoice, {}, {}, param};
  for (const auto& c : v) {
    if (!c.is_string() || c.get<std::string>().empty())
      bad(param, "must be a non-empty list of non-empty strings");
    so.choices.push_back(c.get<std::string>());
    so.spec += c.dump() + "\n";
  }
  return so;
}

std::optional<StructuredOutput> from_response_format(const ordered_json& rf) {
  if (!rf.is_object()) bad("response_format", "must be an object");
  const ordered_json* type = field(rf, "type");
  if (!type || !type->is_string()) bad("response_format", "needs a 'type'");
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object")
    return StructuredOutput{StructuredOutput::Kind::kJsonObject, "", {}, "response_format"};
  if (t == "json_schema") {
    const ordered_json* js = field(rf, "json_schema");
    if (!js || !js->is_object()) bad("response_format", "of type json_schema needs a 'json_schema' object");
    const ordered_json* schema = field(*js, "schema");
    if (!schema) bad("response_format.json_schema.schema", "is required");
    if (const ordered_json* name = field(*js, "name"); name && !name->is_string()) {
      bad("response_format.json_schema.name", "must be a string");
    }
    if (const ordered_json* strict = field(*js, "strict"); strict && !strict->is_boolean()) {
      bad("response_format.json_schema.strict", "must be a boolean");
    }
    return from_schema(*schema, "response_format.json_schema.schema");
  }
  bad("response_format", "type must be one of text, json_object, json_schema (got '" + t + "')");
}

}  // namespace

std::optional<StructuredOutput> parse_structured_output(const ordered_json& body) {
  std::vector<StructuredOutput> asked;
  if (const ordered_json* rf = field(body, "response_format")) {
    if (auto so = from_response_format(*rf)) asked.push_back(std::move(*so));
  }
  if (const ordered_json* so = field(body, "structured_outputs")) {
    if (!so->is_object()) bad("structured_outputs", "must be an object");
    if (const ordered_json* v = field(*so, "json")) {
      asked.push_back(from_schema_field(*v, "structured_outputs.json"));
    }
    if (const ordered_json* v = field(*so, "regex"))
      asked.push_back(from_regex(*v, "structured_outputs.regex"));
    if (const ordered_json* v = field(*so, "choice"))
      asked.push_back(from_choice(*v, "structured_outputs.choice"));
    for (const char* k : {"grammar", "structural_tag"}) {
      if (field(*so, k))
        bad(std::string("structured_outputs.") + k, "is not supported (use json, regex or choice)");
    }
    if (const ordered_json* v = field(*so, "json_object"); v && v->is_boolean() && v->get<bool>()) {
      asked.push_back({StructuredOutput::Kind::kJsonObject, "", {}, "structured_outputs.json_object"});
    }
  }
  if (const ordered_json* v = field(body, "guided_json")) {
    asked.push_back(from_schema_field(*v, "guided_json"));
  }
  if (const ordered_json* v = field(body, "guided_regex")) asked.push_back(from_regex(*v, "guided_regex"));
  if (const ordered_json* v = field(body, "guided_choice")) asked.push_back(from_choice(*v, "guided_choice"));
  if (asked.empty()) return std::nullopt;
  if (asked.size() > 1) {
    bad(asked[1].param, "cannot be combined with '" + asked[0].param + "': ask for one structured output");
  }
  return std::move(asked[0]);
}

namespace {

// Compiled grammars by (vocabulary, kind, spec). Bounded by count and by bytes: a grammar's caches keep
// growing while requests use it (to ~100 MB for a large schema), so every entry is measured again before
// each insertion. Least recently used out first; a grammar in use stays alive through its requests.
class GrammarCache {
 public:
  std::shared_ptr<const grammar::CompiledGrammar> get(const std::string& key) {
    return lru_.get(key).value_or(nullptr);
  }
  void put(const std::string& key, std::shared_ptr<const grammar::CompiledGrammar> g) {
    lru_.recost(cost);
    lru_.put(key, g, cost(key, g));
  }
  GrammarCacheStats stats() const { return {lru_.size(), lru_.cost()}; }
  void set_limits(size_t max_grammars, size_t max_bytes) { lru_.set_limits(max_grammars, max_bytes); }

 private:
  static size_t cost(const std::string& key, const std::shared_ptr<const grammar::CompiledGrammar>& g) {
    return key.capacity() + g->memory_bytes();
  }
  util::LruCache<std::string, std::shared_ptr<const grammar::CompiledGrammar>> lru_{
      kDefaultGrammarCacheCount, kDefaultGrammarCacheBytes};
};

GrammarCache& cache() {
  static GrammarCache c;
  return c;
}

// Specs whose grammar could not be built (past a grammar bound, an unsupported keyword), by their key: one
// refused after a second of work is refused again at once, so one costly refused spec sent over and over
// costs one compile. Only the build's refusals are kept: they depend on the spec alone (bounds count steps
// and states, not time); the first mask's work depends on the masks the vocabulary has shared so far. The
// reason is kept without the request's parameter name, which the same spec may come under. An entry holds
// its vocabulary, whose address is in the key.
struct Refusal {
  std::string reason;
  std::shared_ptr<const grammar::TokenVocab> vocab;
};
constexpr size_t kRefusalCacheCount = 256;
constexpr size_t kRefusalCacheBytes = size_t{32} << 20;

util::LruCache<std::string, std::shared_ptr<const Refusal>>& refusals() {
  static util::LruCache<std::string, std::shared_ptr<const Refusal>> r{kRefusalCacheCount,
                                                                       kRefusalCacheBytes};
  return r;
}

util::SingleFlight<std::shared_ptr<const grammar::CompiledGrammar>>& compiles_in_flight() {
  static util::SingleFlight<std::shared_ptr<const grammar::CompiledGrammar>> f;
  return f;
}

std::atomic<uint64_t> compiles_run{0};

struct CompileLimits {
  size_t running;
  size_t waiting;
};

CompileLimits compile_limits(const ServerOptions& o) {
  // Compiles running and waiting each hold an HTTP worker: together at most half of them, so a flood of
  // costly schemas leaves the other half to requests that need no compile (and to /health).
  const size_t half = std::max<size_t>(http_worker_count(o) / 2, 1);
  const size_t running = std::min(static_cast<size_t>(o.max_grammar_compiles), half);
  return {running, std::min(kGrammarCompileQueuePerPlace * running, half - running)};
}

util::AdmissionGate& compile_gate() {
  static const CompileLimits initial = compile_limits(ServerOptions{});
  static util::AdmissionGate g(initial.running, initial.waiting);
  return g;
}

[[noreturn]] void compile_queue_full() {
  throw ApiError(429, "rate_limit_error",
                 "too many grammar compiles are waiting (structured outputs or strict tools); retry shortly");
}

// A cached grammar or refusal, or else a compile under the gate, all on the request's thread before the
// request is queued: the grammar is built and compiled over the vocabulary, then its first mask and the
// distances to its end (budget steering) are computed, so a grammar too large or too costly to enforce
// (grammar::WorkMeter) is a 400 starting with `refusal` here, not a stall in the engine, whose steps wait for
// every mask; and the engine's first step reads both from the grammar's caches. A request whose spec another
// request is compiling waits for that compile (holding a place in the gate's line, not a running place);
// the owner asks the caches again once it has a place, since the requests ahead may have compiled it.
// (The owner takes its place after it is known as the owner: waiters arriving in between may fill the line
// first, and then the owner's 429 is theirs too.)
std::shared_ptr<const grammar::CompiledGrammar> cached_or_compiled(
    const std::string& key, const std::shared_ptr<const grammar::TokenVocab>& vocab,
    const std::function<grammar::Grammar()>& build, const std::string& refusal, const std::string& param) {
  const auto known = [&key]() -> std::shared_ptr<const grammar::CompiledGrammar> {
    if (auto g = cache().get(key)) return g;
    if (auto r = refusals().get(key)) throw Error((*r)->reason);
    return nullptr;
  };
  try {
    if (auto g = known()) return g;
    return compiles_in_flight().run(
        key,
        [&]() -> std::shared_ptr<const grammar::CompiledGrammar> {
          auto ticket = compile_gate().enter();
          if (!ticket) compile_queue_full();
          if (auto g = known()) return g;
          ++compiles_run;
          grammar::Grammar built;
          try {
            built = build();
          } catch (const Error& e) {
            refusals().put(key, std::make_shared<const Refusal>(Refusal{e.what(), vocab}),
                           key.capacity() + std::string_view(e.what()).size());
            throw;
          }
          auto compiled = std::make_shared<const grammar::CompiledGrammar>(std::move(built), vocab);
          std::vector<uint64_t> bits;
          grammar::GrammarMatcher m(compiled);
          m.fill_mask(bits);
          m.min_completion_bytes();
          cache().put(key, compiled);
          return compiled;
        },
        []() -> std::shared_ptr<void> {
          // A place in the line, or a running place left idle when the line is full (it may be 0 places
          // long): the waiters stay within the gate's bounds.
          auto place = compile_gate().stand_in_line();
          if (place) return std::make_shared<util::AdmissionGate::Ticket>(std::move(*place));
          auto idle = compile_gate().try_enter();
          if (!idle) compile_queue_full();
          return std::make_shared<util::AdmissionGate::Ticket>(std::move(*idle));
        });
  } catch (const Error& e) {
    throw ApiError::bad_request(refusal + e.what(), param);
  }
}

}  // namespace

GrammarCacheStats grammar_cache_stats() {
  GrammarCacheStats stats = cache().stats();
  stats.refusals = refusals().size();
  stats.compiles_waiting_for_equal = compiles_in_flight().waiting();
  stats.compiles = compiles_run.load();
  return stats;
}

void set_grammar_cache_limits(size_t max_grammars, size_t max_bytes) {
  cache().set_limits(max_grammars, max_bytes);
}

size_t default_grammar_compiles() {
  // As vLLM's structured-output workers: half the cores, 1 to 8.
  return std::clamp<size_t>(std::thread::hardware_concurrency() / 2, 1, 8);
}

void set_grammar_compile_limits(const ServerOptions& o) {
  const CompileLimits l = compile_limits(o);
  compile_gate().set_limits(l.running, l.waiting);
}

std::shared_ptr<const grammar::CompiledGrammar> compile_structured_output(
    const StructuredOutput& so, const std::shared_ptr<const grammar::TokenVocab>& vocab) {
  const std::string key = std::to_string(reinterpret_cast<uintptr_t>(vocab.get())) + "\x1f" +
                          std::to_string(static_cast<int>(so.kind)) + "\x1f" + so.spec;
  // Generation wants few whitespace bytes: runs of at most 2 keep a random model's output short.
  grammar::JsonSchemaOptions options;
  options.max_whitespace = 2;
  auto build = [&so, &options]() -> grammar::Grammar {
    switch (so.kind) {
      case StructuredOutput::Kind::kJsonObject:
        return grammar::json_object_grammar(options);
      case StructuredOutput::Kind::kJsonSchema:
        return grammar::compile_json_schema(so.spec, options);
      case StructuredOutput::Kind::kRegex:
        return grammar::regex_grammar(so.spec);
      case StructuredOutput::Kind::kChoice:
        break;
    }
    return grammar::choice_grammar(so.choices);
  };
  return cached_or_compiled(key, vocab, build, "'" + so.param + "' cannot be enforced: ", so.param);
}

std::shared_ptr<const grammar::CompiledGrammar> compile_tool_call_grammar(
    const ordered_json& tools, bool forced, const std::string& forced_name, bool parallel,
    const std::shared_ptr<const grammar::TokenVocab>& vocab) {
  if (!tools.is_array() || tools.empty()) {
    if (forced) bad("tools", "are required by tool_choice");
    return nullptr;
  }
  std::vector<grammar::ToolSchema> list;
  bool any_strict = false;
  for (const auto& t : tools) {
    const ordered_json* fn = t.is_object() ? field(t, "function") : nullptr;
    const ordered_json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!name || !name->is_string()) continue;
    if (!forced_name.empty() && name->get_ref<const std::string&>() != forced_name) continue;
    const ordered_json* strict = field(*fn, "strict");
    const bool is_strict = strict && strict->is_boolean() && strict->get<bool>();
    any_strict = any_strict || is_strict;
    const ordered_json* params = field(*fn, "parameters");
    list.push_back({name->get<std::string>(), params ? *params : ordered_json(), forced || is_strict});
  }
  if (list.empty()) {
    if (!forced_name.empty()) bad("tool_choice", "names '" + forced_name + "', which is not among the tools");
    if (forced) bad("tools", "hold no function to call");
    return nullptr;
  }
  if (!forced && !any_strict) return nullptr;
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(vocab.get())) + "\x1ftools\x1f" +
                    (forced ? "F" : "A") + (parallel ? "P" : "1");
  for (const auto& t : list) key += "\x1f" + t.name + (t.schema ? "\x1e" + t.parameters.dump() : "");
  grammar::ToolCallGrammarOptions options;
  options.free_text = !forced;
  options.parallel = parallel;
  options.json.max_whitespace = 2;  // as for structured outputs: few whitespace bytes
  return cached_or_compiled(
      key, vocab, [&list, &options] { return grammar::tool_call_grammar(list, options); },
      "cannot constrain decoding to these tools: ", "tools");
}

}  // namespace spark
