#include "server/tool_call_constraint.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "constraint_test_util.h"
#include "parser_test_util.h"
#include "schema_validator.h"
#include "server/tool_call_parser.h"
#include "spark/error.h"

namespace spark {

namespace {

// One tool per kind of schema, plus a mix.
nlohmann::json constraint_tools() {
  return nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "say", "parameters": {"type": "object",
      "properties": {"text": {"type": "string"}}, "required": ["text"]}}},
    {"type": "function", "function": {"name": "tap", "parameters": {"type": "object",
      "properties": {"index": {"type": "integer"}}, "required": ["index"]}}},
    {"type": "function", "function": {"name": "move", "parameters": {"type": "object",
      "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}}},
    {"type": "function", "function": {"name": "toggle", "parameters": {"type": "object",
      "properties": {"on": {"type": "boolean"}}, "required": ["on"]}}},
    {"type": "function", "function": {"name": "weather", "parameters": {"type": "object",
      "properties": {"unit": {"type": "string", "enum": ["c", "f", "kelvin"]}, "days": {"enum": [1, 2, 10]},
                     "mixed": {"enum": [null, "x", 3, true]}}, "required": ["unit"]}}},
    {"type": "function", "function": {"name": "alarm", "parameters": {"type": "object",
      "properties": {"options": {"type": "object", "properties": {
          "repeat": {"type": "boolean"}, "label": {"type": "string"},
          "inner": {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]}},
        "required": ["repeat"], "additionalProperties": false}}, "required": ["options"]}}},
    {"type": "function", "function": {"name": "tag", "parameters": {"type": "object",
      "properties": {"labels": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
                     "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
      "required": ["labels"]}}},
    {"type": "function", "function": {"name": "get_time"}},
    {"type": "function", "function": {"name": "note", "parameters": {"type": "object",
      "properties": {"title": {"type": "string"}, "priority": {"type": "integer"}, "done": {"type": "boolean"},
                     "data": {}, "meta": {"type": "object"}, "maybe": {"type": ["integer", "null"]},
                     "who": {"type": ["string", "null"]}},
      "required": ["title"]}}}
  ])");
}

const nlohmann::json& tool_schema(const nlohmann::json& tools, const std::string& name) {
  static const nlohmann::json kNoParams = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  for (const auto& t : tools) {
    if (t["function"]["name"] == name) {
      return t["function"].contains("parameters") ? t["function"]["parameters"] : kNoParams;
    }
  }
  return kNoParams;
}

struct Walk {
  std::string text;
  size_t steps = 0;
};

// Samples uniformly among the allowed tokens until the end token; optionally checks every mask against the
// token-by-token reference.
Walk random_walk(ToolCallConstraint& constraint, const ConstraintVocab& vocab, uint64_t seed,
                 bool check_mask) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> mask;
  Walk walk;
  while (!constraint.ended()) {
    const size_t count = constraint.allowed_tokens(mask);
    EXPECT_GT(count, 0u) << "no token allowed after: " << walk.text;
    if (count == 0) break;
    if (check_mask) {
      size_t mismatches = 0;
      for (size_t id = 0; id < vocab.size() && mismatches < 5; ++id) {
        const bool reference = constraint.allows(static_cast<int32_t>(id));
        if ((mask[id] != 0) != reference) {
          ++mismatches;
          ADD_FAILURE() << "token " << id << " '" << vocab.text(static_cast<int32_t>(id)) << "' is "
                        << (reference ? "allowed" : "not allowed")
                        << " but the mask says otherwise, after: " << walk.text;
        }
      }
    }
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < mask.size(); ++id) {
      if (mask[id]) allowed.push_back(static_cast<int32_t>(id));
    }
    const int32_t token = allowed[rng() % allowed.size()];
    constraint.accept(token);
    if (!vocab.is_end(token)) walk.text += vocab.text(token);
    if (++walk.steps > 20000) {
      ADD_FAILURE() << "generation did not terminate: " << walk.text;
      break;
    }
  }
  EXPECT_TRUE(constraint.complete());
  return walk;
}

// The parser must read the walk as exactly one clean call of an allowed tool with schema-valid arguments.
void expect_valid_call(const nlohmann::json& tools, const std::string& text, const std::string& forced) {
  std::vector<std::string> chunks;
  for (size_t i = 0; i < text.size(); i += 3) chunks.push_back(text.substr(i, 3));
  const test::ToolRun run = test::run_tools(tools, true, chunks);
  SCOPED_TRACE(text);
  EXPECT_EQ(run.message.content, "");
  EXPECT_TRUE(run.recoveries.empty()) << run.recoveries.front().kind << ": " << run.recoveries.front().detail;
  ASSERT_EQ(run.message.tool_calls.size(), 1u);
  const ParsedToolCall& call = run.message.tool_calls[0];
  if (!forced.empty()) {
    EXPECT_EQ(call.name, forced);
  }
  const auto args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.arguments;
  EXPECT_EQ(test::validate(args, tool_schema(tools, call.name), true), "") << call.arguments;
}

}  // namespace

TEST(ToolCallConstraint, RandomWalksForEachToolGiveValidCalls) {
  const nlohmann::json tools = constraint_tools();
  auto vocab = test::small_vocab();
  for (const auto& t : tools) {
    const std::string name = t["function"]["name"];
    for (uint64_t seed = 0; seed < 25; ++seed) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      ToolCallConstraint constraint(vocab, tools, name);
      const Walk walk = random_walk(constraint, *vocab, seed, seed < 3);
      expect_valid_call(tools, walk.text, name);
    }
  }
}

TEST(ToolCallConstraint, RequiredChoosesAmongAllTools) {
  const nlohmann::json tools = constraint_tools();
  auto vocab = test::small_vocab();
  std::set<std::string> names;
  for (uint64_t seed = 100; seed < 160; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ToolCallConstraint constraint(vocab, tools);
    const Walk walk = random_walk(constraint, *vocab, seed, seed < 103);
    expect_valid_call(tools, walk.text, "");
    const test::ToolRun run = test::run_tools(tools, true, {walk.text});
    if (!run.message.tool_calls.empty()) names.insert(run.message.tool_calls[0].name);
  }
  EXPECT_GT(names.size(), 3u);  // the walk really chooses among them
}

TEST(ToolCallConstraint, StartsWithTheCallTagAndEndsWithEndToken) {
  auto vocab = test::small_vocab();
  ToolCallConstraint constraint(vocab, constraint_tools(), "get_time");
  std::vector<uint8_t> mask;
  constraint.allowed_tokens(mask);
  for (size_t id = 0; id < vocab->size(); ++id) {
    const std::string& t = vocab->text(static_cast<int32_t>(id));
    const bool prefix =
        !t.empty() && id != 0 && std::string("<tool_call>get_time</tool_call>").rfind(t, 0) == 0;
    EXPECT_EQ(mask[id] != 0, prefix) << "'" << t << "'";
  }
  EXPECT_THROW(constraint.accept(test::kEndToken), Error);
  EXPECT_THROW(constraint.accept(1 + 'x'), Error);
  for (const char* t : {"<tool_call>", "get_", "time", "</tool_call>"}) {
    const auto& texts = test::small_vocab_texts();
    const auto it = std::find(texts.begin(), texts.end(), std::string(t));
    if (it != texts.end()) {
      constraint.accept(static_cast<int32_t>(it - texts.begin()));
    } else {
      for (char c : std::string(t)) constraint.accept(1 + static_cast<uint8_t>(c));
    }
  }
  EXPECT_TRUE(constraint.complete());
  EXPECT_EQ(constraint.allowed_tokens(mask), 1u);
  EXPECT_EQ(mask[test::kEndToken], 1);
  constraint.accept(test::kEndToken);
  EXPECT_TRUE(constraint.ended());
  EXPECT_EQ(constraint.allowed_tokens(mask), 0u);
}

namespace {

// Feeds `text` byte by byte (tokens 1..256 are the bytes); returns how many bytes were allowed.
size_t admitted(const nlohmann::json& tools, const std::string& forced, const std::string& text,
                bool* complete = nullptr) {
  ToolCallConstraint constraint(test::small_vocab(), tools, forced);
  size_t n = 0;
  for (char c : text) {
    const int32_t token = 1 + static_cast<uint8_t>(c);
    if (!constraint.allows(token)) break;
    constraint.accept(token);
    ++n;
  }
  if (complete != nullptr) *complete = constraint.complete();
  return n;
}

// The whole text is allowed, and leaves the call complete or not as said.
bool admits(const nlohmann::json& tools, const std::string& forced, const std::string& text, bool complete) {
  bool done = false;
  return admitted(tools, forced, text, &done) == text.size() && done == complete;
}

// Everything but the last byte is allowed: the last byte is where the text goes wrong.
bool rejects_last(const nlohmann::json& tools, const std::string& forced, const std::string& text) {
  return admitted(tools, forced, text) == text.size() - 1;
}

}  // namespace

TEST(ToolCallConstraint, AcceptsExactlyTheSyntaxAndTheSchema) {
  const nlohmann::json tools = constraint_tools();
  const std::string open = "<tool_call>";
  EXPECT_TRUE(
      admits(tools, "tap", open + "tap<arg_key>index</arg_key><arg_value>-42</arg_value></tool_call>", true));
  EXPECT_TRUE(rejects_last(tools, "tap", open + "tap<arg_key>index</arg_key><arg_value>4."));
  EXPECT_TRUE(rejects_last(tools, "tap", open + "tap<arg_key>index</arg_key><arg_value>04"));
  EXPECT_TRUE(rejects_last(tools, "tap", open + "tap</"));           // index is required
  EXPECT_TRUE(rejects_last(tools, "tap", open + "tap<arg_key>id"));  // undeclared key
  EXPECT_TRUE(rejects_last(tools, "tap", open + "s"));               // not the forced tool
  EXPECT_TRUE(admits(tools, "", open + "say<arg_key>text</arg_key><arg_value>a \"q\" {x}", false));
  EXPECT_TRUE(rejects_last(tools, "say", open + "say<arg_key>text</arg_key><arg_value>a<b"));
  EXPECT_TRUE(
      admits(tools, "move",
             open + "move<arg_key>y</arg_key><arg_value>1.5e-3</arg_value><arg_key>x</arg_key><arg_value>0"
                    "</arg_value></tool_call>",
             true));
  EXPECT_TRUE(
      rejects_last(tools, "move", open + "move<arg_key>y</arg_key><arg_value>1</arg_value><arg_key>y"));
  EXPECT_TRUE(rejects_last(tools, "toggle", open + "toggle<arg_key>on</arg_key><arg_value>T"));
  EXPECT_TRUE(
      admits(tools, "weather", open + "weather<arg_key>unit</arg_key><arg_value>kelvin</arg_value>", false));
  EXPECT_TRUE(rejects_last(tools, "weather", open + "weather<arg_key>unit</arg_key><arg_value>k<"));
  EXPECT_TRUE(
      admits(tools, "weather", open + "weather<arg_key>days</arg_key><arg_value>10</arg_value>", false));
  EXPECT_TRUE(
      admits(tools, "alarm",
             open + "alarm<arg_key>options</arg_key><arg_value>{\"repeat\": true, \"inner\": {\"depth\": 2}}"
                    "</arg_value></tool_call>",
             true));
  EXPECT_TRUE(rejects_last(tools, "alarm", open + "alarm<arg_key>options</arg_key><arg_value>{}"));
  EXPECT_TRUE(rejects_last(tools, "alarm", open + "alarm<arg_key>options</arg_key><arg_value>{\"o"));
  EXPECT_TRUE(admits(tools, "tag",
                     open +
                         "tag<arg_key>labels</arg_key><arg_value>[\"a\", \"b\\n\"]</arg_value><arg_key>matrix"
                         "</arg_key><arg_value>[[1, 2.5], []]</arg_value></tool_call>",
                     true));
  EXPECT_TRUE(rejects_last(tools, "tag", open + "tag<arg_key>labels</arg_key><arg_value>[]"));  // minItems 1
  EXPECT_TRUE(
      rejects_last(tools, "tag", open + "tag<arg_key>labels</arg_key><arg_value>[\"a\",\"b\",\"c\","));
  EXPECT_TRUE(rejects_last(tools, "tag", open + "tag<arg_key>labels</arg_key><arg_value>[\"\\u"));
  EXPECT_TRUE(
      admits(tools, "note",
             open + "note<arg_key>title</arg_key><arg_value>x</arg_value><arg_key>meta</arg_key><arg_value>"
                    "{\"any\": [1, {\"k\": null}]}</arg_value><arg_key>maybe</arg_key><arg_value>null"
                    "</arg_value></tool_call>",
             true));
  // Strings are well-formed UTF-8: a lone continuation byte or an unfinished character cannot be written.
  EXPECT_TRUE(rejects_last(tools, "say", open + "say<arg_key>text</arg_key><arg_value>\x80"));
  EXPECT_TRUE(rejects_last(tools, "say", open + "say<arg_key>text</arg_key><arg_value>\xc3<"));
  EXPECT_TRUE(rejects_last(tools, "say", open + "say<arg_key>text</arg_key><arg_value>\xed\xa0"));
  EXPECT_TRUE(
      admits(tools, "say", open + "say<arg_key>text</arg_key><arg_value>\xc3\xa9\xf0\x9f\x98\x80<", false));
}

TEST(ToolCallConstraint, StringLengthIsBounded) {
  ToolCallConstraintOptions options;
  options.max_string_bytes = 8;
  ToolCallConstraint constraint(test::small_vocab(), constraint_tools(), "say", options);
  for (char c : std::string("<tool_call>say<arg_key>text</arg_key><arg_value>abcdefgh")) {
    constraint.accept(1 + static_cast<uint8_t>(c));
  }
  std::vector<uint8_t> mask;
  constraint.allowed_tokens(mask);
  for (size_t id = 1; id < mask.size(); ++id) {
    const std::string& t = test::small_vocab()->text(static_cast<int32_t>(id));
    if (mask[id]) {
      EXPECT_EQ(t[0], '<') << "'" << t << "' allowed past the length bound";
    }
  }
  EXPECT_TRUE(mask[1 + '<']);
}

TEST(ToolCallConstraint, BadChoicesAreUserErrors) {
  auto vocab = test::small_vocab();
  EXPECT_THROW(ToolCallConstraint(vocab, constraint_tools(), "launch"), Error);
  EXPECT_THROW(ToolCallConstraint(vocab, nlohmann::json::array()), Error);
  nlohmann::json deep = {{"type", "string"}};
  for (int i = 0; i < 10; ++i) deep = {{"type", "object"}, {"properties", {{"d", deep}}}};
  const nlohmann::json deep_tool = {
      {{"type", "function"}, {"function", {{"name", "deep"}, {"parameters", deep}}}}};
  EXPECT_THROW(ToolCallConstraint(vocab, deep_tool, "deep"), Error);
  const nlohmann::json bad_enum = nlohmann::json::parse(
      R"([{"function": {"name": "e", "parameters": {"properties": {"v": {"enum": ["<a>"]}}}}}])");
  EXPECT_THROW(ToolCallConstraint(vocab, bad_enum, "e"), Error);
}

}  // namespace spark
