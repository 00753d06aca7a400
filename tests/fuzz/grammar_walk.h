// The grammar harnesses' shared body (grammar_fuzz.cpp over a tokenizer's vocabulary, grammar_bytes_fuzz.cpp
// over the 256 single bytes): a user-supplied constraint (a JSON Schema, a regular expression or a vLLM
// choice list) is compiled with the real engine (src/grammar), then a bounded walk picks allowed tokens. A
// constraint the engine refuses must be a spark::Error; anything else thrown, a crash or a sanitizer report
// is a bug. Properties checked:
// - each mask equals the slow reference (the token's bytes run through the automaton), on a stride of the
//   vocabulary per step (every token at the first step), and the mask's count is its popcount;
// - an accepted token advances the matcher; after a token was accepted some token stays allowed (the engine
//   never leads the model into a prefix it cannot finish);
// - a walk that ends gives a text the constraint accepts: for a schema, JSON that json_valid passes; for a
//   regex, a full match of the same pattern compiled in search mode with anchors; for choices, one of them;
//   for tools, calls read back by plain string search (never the automaton): declared tool names, no `<`
//   inside a name, key or value, at most one call unless parallel, and each strict call's arguments, as
//   the parser types them, an object json_valid passes against the tool's parameters.
// A mask or token past the grammar's work limit ends the walk with spark::RequestError, the documented
// refusal; the limit is lower than the server's, and the slow reference has a budget of its own, so costly
// inputs stay short runs.
//
// Input: byte 0 % 4 picks the form (0 JSON Schema, 1 regex, 2 choices separated by '\n', 3 tools: a JSON
// array of {"name", "parameters", "strict"}, with byte 0 / 4 bit 0 for free text before the calls
// (tool_choice "auto") and bit 1 for a single call); the rest up to the first NUL is the constraint's text,
// the bytes after it pick the walk's tokens (16 bits each, among those allowed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "grammar/json_schema.h"
#include "grammar/json_validate.h"
#include "grammar/matcher.h"
#include "grammar/tool_call.h"
#include "spark/error.h"

namespace spark::fuzz {

struct GrammarWalk {
  std::shared_ptr<const grammar::TokenVocab> vocab;
  int32_t end_id = -1;           // the vocabulary's end token
  int max_steps = 24;            // tokens picked at most
  int32_t reference_stride = 1;  // tokens id % stride == step % stride checked against the slow reference
};

// The harness's stride, or SPARK_FUZZ_REFERENCE_STRIDE (1-64) when set: a long campaign trades checks per
// execution for executions (the slow reference is about half of an execution at stride 1).
inline int32_t reference_stride_from_env(int32_t fallback) {
  const char* s = std::getenv("SPARK_FUZZ_REFERENCE_STRIDE");
  if (s == nullptr || *s == '\0') return fallback;
  const int v = std::atoi(s);
  check(v >= 1 && v <= 64, "SPARK_FUZZ_REFERENCE_STRIDE must be 1 to 64", s);
  return v;
}

namespace grammar_walk_detail {

constexpr size_t kMaxConstraintBytes = 4096;  // compile cost grows with the text: keep each run short
// A lower work limit than the server's (grammar::kDefaultWorkLimit, about a second): a mask past it is the
// documented refusal, and the walks stay short.
constexpr uint64_t kWorkLimit = uint64_t{1} << 20;
constexpr uint64_t kReferenceWork = uint64_t{1} << 24;

inline bool bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

inline std::vector<std::string> split_choices(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    const size_t nl = text.find('\n', begin);
    out.push_back(text.substr(begin, nl == std::string::npos ? std::string::npos : nl - begin));
    if (nl == std::string::npos) break;
    begin = nl + 1;
  }
  return out;
}

struct ToolForm {
  std::vector<grammar::ToolSchema> tools;
  grammar::ToolCallGrammarOptions options;
};

// The tools form's constraint: null when it is not a list of well-formed tool objects (no oracle then).
inline std::optional<ToolForm> parse_tools(const std::string& text, int flags) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (!j.is_array()) return std::nullopt;
  ToolForm out;
  for (const auto& t : j) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) return std::nullopt;
    const bool strict = !t.contains("strict") || !t["strict"].is_boolean() || t["strict"].get<bool>();
    out.tools.emplace_back(t["name"].get<std::string>(), t.value("parameters", nlohmann::ordered_json()),
                           strict);
  }
  out.options.free_text = (flags & 1) != 0;
  out.options.parallel = (flags & 2) == 0;
  out.options.json.max_whitespace = 2;  // as the server compiles them
  return out;
}

// The calls in `text`, read by string search: every tag where the syntax puts it, names and arguments as the
// tool-call parser would type them, each strict call's arguments valid against its tool's schema.
inline void check_tool_calls(const ToolForm& f, const std::string& text) {
  using Json = nlohmann::ordered_json;
  constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kKey = "<arg_key>",
                             kKeyEnd = "</arg_key><arg_value>", kValueEnd = "</arg_value>";
  size_t pos = 0;
  if (f.options.free_text) {
    pos = text.find(kOpen);
    if (pos == std::string::npos) return;  // free text only
  }
  const auto expect = [&](std::string_view tag) {
    check(text.compare(pos, tag.size(), tag) == 0, "a tool-call tag is missing", text);
    pos += tag.size();
  };
  const auto until_lt = [&]() {
    const size_t lt = text.find('<', pos);
    check(lt != std::string::npos, "a tool call is not closed", text);
    std::string part = text.substr(pos, lt - pos);
    pos = lt;
    return part;
  };
  int calls = 0;
  while (pos < text.size()) {
    expect(kOpen);
    ++calls;
    const std::string name = until_lt();
    const grammar::ToolSchema* tool = nullptr;
    for (const auto& t : f.tools) {
      if (t.name == name) {
        tool = &t;
        break;  // the first of that name, as the grammar keeps it
      }
    }
    check(tool != nullptr, "a call names no declared tool", name);
    Json args = Json::object();
    bool typed = true;
    while (text.compare(pos, kKey.size(), kKey) == 0) {
      pos += kKey.size();
      const std::string key = until_lt();
      expect(kKeyEnd);
      const std::string value = until_lt();
      expect(kValueEnd);
      if (!tool->schema) continue;
      check(!args.contains(key), "an argument is written twice", key);
      const Json& params = tool->parameters;
      const Json* prop = params.is_object() && params.contains("properties") &&
                                 params["properties"].is_object() && params["properties"].contains(key)
                             ? &params["properties"][key]
                             : nullptr;
      if (prop != nullptr && grammar::tool_parameter_is_text(*prop)) {
        args[key] = value;
        continue;
      }
      try {
        args[key] = Json::parse(value);
      } catch (const nlohmann::json::out_of_range&) {
        typed = false;  // a number past a double: valid JSON, no oracle
      } catch (const nlohmann::json::exception& e) {
        fail("a tool-call argument is not JSON", key + " = " + value + " | " + e.what());
      }
    }
    expect(kClose);
    if (tool->schema && typed && tool->parameters.is_object() && !tool->parameters.empty()) {
      bool valid = false;
      try {
        valid = grammar::json_valid(args, tool->parameters, tool->parameters);
      } catch (const spark::Error&) {
        valid = true;  // a keyword the validator cannot evaluate exactly: no oracle
      }
      check(valid, "a call's arguments fail its tool's schema", args.dump());
    } else if (tool->schema && typed) {
      check(args.empty(), "a tool without parameters got arguments", args.dump());
    }
  }
  check(f.options.free_text || calls >= 1, "no call where one was required", text);
  check(f.options.parallel || calls <= 1, "more than one call where one was asked for", text);
}

// The finished text against an oracle that does not walk the token automaton.
inline void check_complete(int form, const std::string& constraint, const std::vector<std::string>& choices,
                           const std::optional<ToolForm>& tools, const std::string& text) {
  if (form == 3) {
    check_tool_calls(*tools, text);
    return;
  }
  if (form == 0) {
    nlohmann::ordered_json value, schema;
    try {
      value = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::out_of_range&) {
      return;  // valid JSON (RFC 8259 sets no range) whose number a double cannot hold: no oracle
    } catch (const nlohmann::json::exception& e) {
      fail("a completed schema text is not JSON", text + " | " + e.what());
    }
    schema = nlohmann::ordered_json::parse(constraint);  // compiled, so it parses
    bool valid = false;
    try {
      valid = grammar::json_valid(value, schema, schema);
    } catch (const spark::Error&) {
      return;  // a keyword the validator cannot evaluate exactly: no oracle
    }
    check(valid, "a completed text fails the schema", text);
  } else if (form == 1) {
    bool matches = false;
    try {
      matches = grammar::pattern_matches("^(?:" + constraint + ")$", text);
    } catch (const spark::Error&) {
      return;  // the wrapped pattern is not supported (anchors inside groups)
    }
    check(matches, "a completed text does not match the regex", text);
  } else {
    bool found = false;
    for (const auto& c : choices) found = found || c == text;
    check(found, "a completed text is not one of the choices", text);
  }
}

inline void walk_tokens(const GrammarWalk& w, int form, const std::string& constraint,
                        const std::vector<std::string>& choices, const std::optional<ToolForm>& tools,
                        const std::string& picks,
                        const std::shared_ptr<const grammar::CompiledGrammar>& compiled) {
  namespace g = spark::grammar;
  g::GrammarMatcher m(compiled);
  std::vector<uint64_t> bits;
  std::string text;
  bool ended = false;
  uint64_t reference_work = 0;
  // A tool call spells its tags byte by byte or in small tokens: its walks get four times the steps.
  const int max_steps = form == 3 ? 4 * w.max_steps : w.max_steps;
  for (int step = 0; step < max_steps; ++step) {
    const size_t n = m.fill_mask(bits);
    size_t count = 0;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(w.vocab->size()); ++id) {
      const bool fast = bit(bits, id);
      if (fast) {
        ++count;
        allowed.push_back(id);
      }
      const bool checked = step == 0 || id % w.reference_stride == step % w.reference_stride;
      if (!checked) continue;
      // The slow reference costs about heads^2 a byte (each head's closure); past a budget the walk ends,
      // so an input with many heads stays a short run (the masks themselves are bounded by kWorkLimit).
      const uint64_t heads = m.head_count();
      reference_work += (heads * heads + 1) * (w.vocab->bytes(id).size() + 1);
      if (reference_work > kReferenceWork) return;
      if (fast != m.allows_token(id)) {
        fail("mask differs from the slow reference",
             "step " + std::to_string(step) + " token " + std::to_string(id) + " '" + w.vocab->bytes(id) +
                 "' after '" + text + "' mask " + std::to_string(fast));
      }
    }
    check(n == count, "fill_mask's count is not the mask's popcount");
    check(bit(bits, w.end_id) == m.can_end(), "the end token is allowed exactly when the grammar can end");
    if (allowed.empty()) {
      check(step == 0, "dead end: a prefix the grammar accepted cannot be completed", text);
      return;  // an empty language (e.g. an empty enum)
    }
    const size_t k = static_cast<size_t>(step) * 2;
    const size_t pick =
        k + 1 < picks.size()
            ? (static_cast<size_t>(static_cast<uint8_t>(picks[k])) << 8 | static_cast<uint8_t>(picks[k + 1]))
            : static_cast<size_t>(step) * 7919;
    const int32_t id = allowed[pick % allowed.size()];
    if (!m.accept_token(id)) fail("an allowed token was refused", std::to_string(id));
    if (id == w.end_id) {
      ended = true;
      break;
    }
    text += w.vocab->bytes(id);
  }
  check(ended == m.ended(), "ended() disagrees with the end token");
  if (ended || m.can_end()) check_complete(form, constraint, choices, tools, text);
}

}  // namespace grammar_walk_detail

inline int run_grammar_walk(const GrammarWalk& w, const uint8_t* data, size_t size) {
  namespace g = spark::grammar;
  using namespace grammar_walk_detail;
  if (size == 0) return 0;
  const int form = data[0] % 4;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string constraint = rest.substr(0, nul);
  const std::string picks = nul == std::string::npos ? std::string() : rest.substr(nul + 1);
  if (constraint.size() > kMaxConstraintBytes) return 0;

  std::vector<std::string> choices;
  std::optional<ToolForm> tools;
  std::shared_ptr<const g::CompiledGrammar> compiled;
  try {
    g::Grammar grammar;
    if (form == 0) {
      grammar = g::compile_json_schema(constraint);
    } else if (form == 1) {
      grammar = g::regex_grammar(constraint);
    } else if (form == 3) {
      tools = parse_tools(constraint, data[0] / 4);
      if (!tools) return 0;
      grammar = g::tool_call_grammar(tools->tools, tools->options);
    } else {
      choices = split_choices(constraint);
      grammar = g::choice_grammar(choices);
    }
    compiled = std::make_shared<const g::CompiledGrammar>(std::move(grammar), w.vocab, kWorkLimit);
  } catch (const g::UncheckedSchemaType& e) {
    fail("the schema compiler did not check a keyword's type (the server refuses it, but unchecked)",
         e.what());
  } catch (const spark::Error&) {
    return 0;
  }
  try {
    walk_tokens(w, form, constraint, choices, tools, picks, compiled);
  } catch (const spark::RequestError&) {
    // A mask or token past the work limit: the documented refusal (the server's 400).
  }
  return 0;
}

}  // namespace spark::fuzz
