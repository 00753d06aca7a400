// The tool-call grammar (grammar/tool_call.h) read back by the tool-call parser: random walks over the
// tokens the grammar allows, one tool at a time and among all of them, each finished by the token plan of a
// shortest completion (as the server does when max_tokens runs out), give exactly one clean call (no
// recovery) whose arguments the JSON Schema validator accepts, keywords such as maximum, maxLength and
// pattern included. Ported from the tests of the bespoke automaton the grammar engine replaced.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_validate.h"
#include "grammar/matcher.h"
#include "grammar/tool_call.h"
#include "parser_test_util.h"
#include "server/tool_call_parser.h"

namespace spark {
namespace {

using Json = nlohmann::ordered_json;

// One tool per kind of schema, plus a mix, with the bounds strict tools rely on.
Json tools_json() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "say", "parameters": {"type": "object",
      "properties": {"text": {"type": "string", "maxLength": 70}}, "required": ["text"]}}},
    {"type": "function", "function": {"name": "tap", "parameters": {"type": "object",
      "properties": {"index": {"type": "integer", "minimum": -5, "maximum": 12}}, "required": ["index"]}}},
    {"type": "function", "function": {"name": "move", "parameters": {"type": "object",
      "properties": {"x": {"type": "number", "exclusiveMinimum": 0}, "y": {"type": "number"}},
      "required": ["x", "y"]}}},
    {"type": "function", "function": {"name": "toggle", "parameters": {"type": "object",
      "properties": {"on": {"type": "boolean"}}, "required": ["on"]}}},
    {"type": "function", "function": {"name": "weather", "parameters": {"type": "object",
      "properties": {"unit": {"type": "string", "enum": ["c", "f", "kelvin"]}, "days": {"enum": [1, 2, 10]},
                     "mixed": {"enum": [null, "x", 3, true]}}, "required": ["unit"]}}},
    {"type": "function", "function": {"name": "alarm", "parameters": {"type": "object",
      "properties": {"options": {"type": "object", "properties": {
          "repeat": {"type": "boolean"}, "label": {"type": "string", "pattern": "^[a-z]*$"},
          "inner": {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]}},
        "required": ["repeat"], "additionalProperties": false}}, "required": ["options"]}}},
    {"type": "function", "function": {"name": "tag", "parameters": {"type": "object",
      "properties": {"labels": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1,
                                "maxItems": 3},
                     "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
      "required": ["labels"]}}},
    {"type": "function", "function": {"name": "get_time"}},
    {"type": "function", "function": {"name": "note", "parameters": {"type": "object",
      "properties": {"title": {"type": "string", "minLength": 2, "pattern": "^[A-Z]"}, "priority": {"type": "integer"},
                     "done": {"type": "boolean"}, "data": {}, "meta": {"type": "object"},
                     "maybe": {"type": ["integer", "null"]}, "who": {"type": ["string", "null"]}},
      "required": ["title"]}}}
  ])");
}

std::vector<grammar::ToolSchema> schemas(const Json& tools, const std::string& only) {
  std::vector<grammar::ToolSchema> out;
  for (const auto& t : tools) {
    const auto& f = t["function"];
    if (!only.empty() && f["name"].get<std::string>() != only) continue;
    out.push_back({f["name"].get<std::string>(), f.contains("parameters") ? f["parameters"] : Json()});
  }
  return out;
}

const Json& parameters(const Json& tools, const std::string& name) {
  static const Json kNone = Json::parse(R"({"type": "object", "properties": {}})");
  for (const auto& t : tools) {
    if (t["function"]["name"].get<std::string>() == name)
      return t["function"].contains("parameters") ? t["function"]["parameters"] : kNone;
  }
  return kNone;
}

constexpr int32_t kEnd = 0;

// The end token, every byte, the tool-call tags as their own tokens, words and JSON punctuation.
std::shared_ptr<const grammar::TokenVocab> vocab() {
  std::vector<std::string> t{""};
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  for (const char* s : {"<tool_call>",
                        "</tool_call>",
                        "<arg_key>",
                        "</arg_key>",
                        "<arg_value>",
                        "</arg_value>",
                        "tap",
                        "index",
                        "text",
                        "unit",
                        "kelvin",
                        "labels",
                        "options",
                        "repeat",
                        "inner",
                        "depth",
                        "true",
                        "false",
                        "null",
                        "nul",
                        " the",
                        "ing",
                        "\":",
                        "\", \"",
                        "{\"",
                        "}",
                        "},",
                        "}}",
                        "[\"",
                        "\"]",
                        "[]",
                        "{}",
                        "12",
                        "3.5",
                        "-0",
                        "e+",
                        "E-7",
                        "</",
                        "<arg",
                        "_key>",
                        "value>",
                        "</arg_value></tool_call>",
                        "</arg_key><arg_value>",
                        "\xc3\xa9",
                        "\xf0\x9f\x98\x80",
                        "\xf0\x9f",
                        "\x98\x80",
                        "a<b",
                        "\\n",
                        "\\\"",
                        "\\u00e9",
                        "\n\n",
                        "  ",
                        "Paris"}) {
    t.emplace_back(s);
  }
  return std::make_shared<const grammar::TokenVocab>(std::move(t), std::vector<int32_t>{kEnd});
}

bool bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

// Samples uniformly among the allowed tokens for `free_steps` steps, then follows the plan of a shortest
// completion to the end token, as the server's budget steering does.
std::string walk(const std::shared_ptr<const grammar::CompiledGrammar>& g, uint64_t seed, int free_steps) {
  const auto& v = g->vocab();
  grammar::GrammarMatcher m(g);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> bits;
  std::string text;
  for (int step = 0; step < free_steps && !m.ended(); ++step) {
    m.fill_mask(bits);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id) {
      if (bit(bits, id)) allowed.push_back(id);
    }
    EXPECT_FALSE(allowed.empty()) << text;
    if (allowed.empty()) return text;
    const int32_t pick = allowed[rng() % allowed.size()];
    EXPECT_TRUE(m.accept_token(pick));
    text += v.bytes(pick);
  }
  if (!m.ended()) {
    for (int32_t id : m.shortest_completion_tokens()) {
      EXPECT_TRUE(m.accept_token(id));
      text += v.bytes(id);
    }
    EXPECT_TRUE(m.accept_token(kEnd)) << text;
  }
  return text;
}

void expect_valid_calls(const Json& tools, const std::string& text, const std::string& forced,
                        size_t max_calls) {
  std::vector<std::string> chunks;
  for (size_t i = 0; i < text.size(); i += 3) chunks.push_back(text.substr(i, 3));
  const test::ToolRun run = test::run_tools(nlohmann::json::parse(tools.dump()), true, chunks);
  SCOPED_TRACE(text);
  EXPECT_EQ(run.message.content, "");
  EXPECT_TRUE(run.recoveries.empty()) << run.recoveries.front().kind << ": " << run.recoveries.front().detail;
  ASSERT_GE(run.message.tool_calls.size(), 1u);
  ASSERT_LE(run.message.tool_calls.size(), max_calls);
  for (const ParsedToolCall& call : run.message.tool_calls) {
    if (!forced.empty()) {
      EXPECT_EQ(call.name, forced);
    }
    const auto args = Json::parse(call.arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << call.arguments;
    const Json& schema = parameters(tools, call.name);
    EXPECT_TRUE(grammar::json_valid(args, schema, schema)) << call.name << " " << call.arguments;
  }
}

}  // namespace

TEST(ToolCallGrammarParse, RandomWalksForEachToolGiveValidCalls) {
  const Json tools = tools_json();
  const auto v = vocab();
  for (const auto& t : tools) {
    const std::string name = t["function"]["name"].get<std::string>();
    grammar::ToolCallGrammarOptions o;
    o.parallel = false;
    o.json.max_whitespace = 2;
    const auto g = std::make_shared<const grammar::CompiledGrammar>(
        grammar::tool_call_grammar(schemas(tools, name), o), v);
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      expect_valid_calls(tools, walk(g, seed, static_cast<int>(seed) * 15), name, 1);
    }
  }
}

TEST(ToolCallGrammarParse, RequiredChoosesAmongAllToolsAndParallelCallsParse) {
  const Json tools = tools_json();
  const auto v = vocab();
  for (bool parallel : {false, true}) {
    grammar::ToolCallGrammarOptions o;
    o.parallel = parallel;
    const auto g = std::make_shared<const grammar::CompiledGrammar>(
        grammar::tool_call_grammar(schemas(tools, ""), o), v);
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      expect_valid_calls(tools, walk(g, seed, 200), "", parallel ? 1000 : 1);
    }
  }
}

TEST(ToolCallGrammarParse, ASixtyFiveByteStringIsCarried) {
  const Json tools = tools_json();
  const std::string text =
      "<tool_call>say<arg_key>text</arg_key><arg_value>" + std::string(65, 'x') + "</arg_value></tool_call>";
  ASSERT_TRUE(grammar::grammar_matches(grammar::tool_call_grammar(schemas(tools, "say"), {}), text));
  expect_valid_calls(tools, text, "say", 1);
}

TEST(ToolCallGrammarParse, ShortestCallsFitATightBudget) {
  // What a forced call with max_tokens 24 gets: the plan from the start, tags as single tokens, the end.
  const Json tools = tools_json();
  const auto v = vocab();
  for (const auto& t : tools) {
    const std::string name = t["function"]["name"].get<std::string>();
    const auto g = std::make_shared<const grammar::CompiledGrammar>(
        grammar::tool_call_grammar(schemas(tools, name), {}), v);
    const std::string text = walk(g, 1, 0);
    SCOPED_TRACE(text);
    EXPECT_LE(grammar::GrammarMatcher(g).shortest_completion_tokens().size() + 1, 24u);
    expect_valid_calls(tools, text, name, 1);
  }
}

namespace {

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  }
  out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

// The small vocabulary, then words, capitalised words, CJK, numbers, punctuation runs, pieces of characters
// and whitespace runs, as a byte-level BPE vocabulary has them, up to `size` tokens.
std::shared_ptr<const grammar::TokenVocab> bpe_like_vocab(size_t size) {
  std::vector<std::string> texts;
  for (size_t id = 0; id < vocab()->size(); ++id) texts.push_back(vocab()->bytes(static_cast<int32_t>(id)));
  std::mt19937_64 rng(99);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto word = [&](size_t min_len, size_t max_len) {
    std::string w;
    const size_t len = min_len + pick(max_len - min_len + 1);
    for (size_t i = 0; i < len; ++i) w += static_cast<char>('a' + pick(26));
    return w;
  };
  const std::string punct = "{}[]()<>\"':,.;!?-_=+*/\\#@&|`~";
  while (texts.size() < size) {
    const size_t kind = pick(100);
    std::string t;
    if (kind < 40) {
      t.append(1, ' ').append(word(2, 10));
    } else if (kind < 60) {
      t = word(2, 8);
    } else if (kind < 68) {
      t = word(2, 9);
      t[0] = static_cast<char>(t[0] - 32);
    } else if (kind < 76) {
      for (size_t i = 0, n = 1 + pick(3); i < n; ++i) t += utf8(0x4E00 + static_cast<uint32_t>(pick(0x51A6)));
    } else if (kind < 80) {
      t = std::to_string(pick(1000));
    } else if (kind < 88) {
      for (size_t i = 0, n = 1 + pick(4); i < n; ++i) t += punct[pick(punct.size())];
    } else if (kind < 94) {
      const std::string c = utf8(0x4E00 + static_cast<uint32_t>(pick(0x51A6)));
      t = pick(2) ? c.substr(0, 1 + pick(2)) : c.substr(1 + pick(2));
    } else {
      t.append(1 + pick(8), ' ');
    }
    texts.push_back(t);
  }
  return std::make_shared<const grammar::TokenVocab>(std::move(texts), std::vector<int32_t>{kEnd});
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// How long a step's mask takes over a vocabulary of the real size (131072 tokens), at the places of a call,
// and what the budget steering's per-token check costs there. Prints times; asserts only that the masks are
// right (spot-checked against the reference), never a time.
TEST(ToolCallGrammarParseBench, MaskTimeOverA131072TokenVocabulary) {
  const auto v = bpe_like_vocab(131072);
  ASSERT_EQ(v->size(), 131072u);
  const Json tools = Json::parse(test::test_tools().dump());
  struct Case {
    const char* name;
    std::string forced;
    std::string prefix;
  };
  const std::vector<Case> cases = {
      {"start", "", ""},
      {"tool_name", "", "<tool_call>get_"},
      {"param_key", "get_weather", "<tool_call>get_weather<arg_key>"},
      {"raw_string", "type_text", "<tool_call>type_text<arg_key>text</arg_key><arg_value>Hello there"},
      {"raw_string_mid_char", "type_text", "<tool_call>type_text<arg_key>text</arg_key><arg_value>caf\xc3"},
      {"json_string", "set_alarm", "<tool_call>set_alarm<arg_key>labels</arg_key><arg_value>[\"wo"},
      {"integer", "tap", "<tool_call>tap<arg_key>index</arg_key><arg_value>12"},
      {"after_value", "get_weather",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value>"},
  };
  std::vector<uint64_t> bits;
  for (bool free_text : {false, true}) {
    for (const Case& c : cases) {
      grammar::ToolCallGrammarOptions o;
      o.free_text = free_text;
      const auto compile_start = std::chrono::steady_clock::now();
      const auto g = std::make_shared<const grammar::CompiledGrammar>(
          grammar::tool_call_grammar(schemas(tools, c.forced), o), v);
      const double compile_ms = ms_since(compile_start);
      grammar::GrammarMatcher m(g);
      ASSERT_TRUE(m.advance(std::string(free_text ? "Let me see. " : "") + c.prefix)) << c.name;
      std::vector<double> times;
      size_t allowed = 0;
      for (int rep = 0; rep < 9; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        allowed = m.fill_mask(bits);
        times.push_back(ms_since(start));
      }
      std::sort(times.begin(), times.end());
      const auto budget_start = std::chrono::steady_clock::now();
      std::vector<uint64_t> narrowed = bits;
      m.restrict_to_budget(narrowed, 40);
      const double budget_ms = ms_since(budget_start);
      std::printf(
          "%-5s %-20s compile %.1f ms, allowed %6zu, mask median %.3f ms, first %.3f ms, budget check %.1f "
          "ms\n",
          free_text ? "auto" : "forced", c.name, compile_ms, allowed, times[times.size() / 2], times.back(),
          budget_ms);
      for (size_t id = 0; id < v->size(); id += 97) {
        ASSERT_EQ(bit(bits, static_cast<int32_t>(id)), m.allows_token(static_cast<int32_t>(id)))
            << c.name << " token " << id;
      }
    }
  }
}

}  // namespace spark
