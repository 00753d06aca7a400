// The tool-call grammar (grammar/tool_call.h): the Spark syntax around each tool's full JSON Schema. Valid
// calls are accepted and invalid ones refused at the first wrong byte (bounds, lengths, patterns, unknown
// names and keys), with no limits of the engine's own; free text before a call under "auto"; one call or
// several; masks equal the slow reference on random walks; the token plan of a shortest completion.
#include "grammar/tool_call.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "spark/error.h"

namespace spark::grammar {
namespace {

using Json = nlohmann::ordered_json;

const std::string kOpen = "<tool_call>";

std::vector<ToolSchema> tools() {
  return {
      {"type_text",
       Json::parse(
           R"({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})")},
      {"tap", Json::parse(R"({"type": "object", "properties": {"index": {"type": "integer", "minimum": 0,
        "maximum": 99}}, "required": ["index"]})")},
      {"name", Json::parse(R"({"type": "object", "properties": {"label": {"type": "string", "maxLength": 5,
        "pattern": "^[a-z]+$"}, "score": {"type": "integer", "exclusiveMaximum": 3}}, "required": ["label"]})")},
      {"note", Json::parse(R"({"type": "object", "properties": {"meta": {"type": "object", "properties":
        {"tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}},
        "additionalProperties": false}, "who": {"type": ["string", "null"]}, "mode": {"enum": ["a", "b<c"]}}})")},
      {"get_time", Json()},
  };
}

// Prefix length of `text` the grammar takes, and whether it can end there.
size_t taken(const Grammar& g, const std::string& text, bool* complete = nullptr) {
  GrammarMatcher m(std::make_shared<const Grammar>(g));
  size_t i = 0;
  while (i < text.size() && m.advance(text.substr(i, 1))) ++i;
  if (complete) *complete = m.can_end();
  return i;
}

bool accepts(const Grammar& g, const std::string& text) {
  return grammar_matches(g, text);
}

// Every byte but the last is taken: the text goes wrong exactly there.
bool rejects_last(const Grammar& g, const std::string& text) {
  return taken(g, text) == text.size() - 1;
}

std::string arg(const std::string& k, const std::string& v) {
  return "<arg_key>" + k + "</arg_key><arg_value>" + v + "</arg_value>";
}

Grammar forced(bool parallel = false) {
  ToolCallGrammarOptions o;
  o.parallel = parallel;
  return tool_call_grammar(tools(), o);
}

}  // namespace

TEST(ToolCallGrammar, AcceptsValidCallsOfEveryTool) {
  const Grammar g = forced();
  EXPECT_TRUE(accepts(g, kOpen + "tap" + arg("index", "42") + "</tool_call>"));
  EXPECT_TRUE(accepts(g, kOpen + "type_text" + arg("text", "a \"quoted\" {x} & more") + "</tool_call>"));
  EXPECT_TRUE(accepts(g, kOpen + "name" + arg("label", "abc") + arg("score", "-12") + "</tool_call>"));
  EXPECT_TRUE(accepts(g, kOpen + "note" + arg("meta", R"({"tags": ["ab", "c"]})") + arg("who", "null") +
                             arg("mode", "a") + "</tool_call>"));
  EXPECT_TRUE(accepts(g, kOpen + "note</tool_call>"));  // nothing required
  EXPECT_TRUE(accepts(g, kOpen + "get_time</tool_call>"));
  EXPECT_TRUE(accepts(g, kOpen + "note" + arg("meta", R"({"tags": ["\u003c"]})") + "</tool_call>"));
}

TEST(ToolCallGrammar, NoLimitsOfItsOwn) {
  const Grammar g = forced();
  // The old automaton stopped strings at 64 bytes and arrays at 8 items.
  EXPECT_TRUE(accepts(g, kOpen + "type_text" + arg("text", std::string(65, 'x')) + "</tool_call>"));
  EXPECT_TRUE(accepts(g, kOpen + "type_text" + arg("text", std::string(5000, 'y')) + "</tool_call>"));
  ToolCallGrammarOptions o;
  const Grammar list = tool_call_grammar(
      {{"put", Json::parse(R"({"properties": {"v": {"type": "array", "items": {"type": "integer"}}}})")}}, o);
  std::string items = "[0";
  for (int i = 1; i < 40; ++i) items += "," + std::to_string(i);
  EXPECT_TRUE(accepts(list, kOpen + "put" + arg("v", items + "]") + "</tool_call>"));
  // Integers without bounds are at most 16 digits: what a client parsing numbers as doubles can hold.
  EXPECT_TRUE(
      accepts(list, kOpen + "put" + arg("v", "[9999999999999999,-9999999999999999]") + "</tool_call>"));
  EXPECT_TRUE(rejects_last(list, kOpen + "put<arg_key>v</arg_key><arg_value>[10000000000000000"));
  EXPECT_TRUE(rejects_last(list, kOpen + "put<arg_key>v</arg_key><arg_value>[12345678901234567"));
}

TEST(ToolCallGrammar, RejectsWhatTheSchemaOrSyntaxRefuses) {
  const Grammar g = forced();
  EXPECT_TRUE(rejects_last(g, kOpen + "tap<arg_key>index</arg_key><arg_value>100"));      // maximum 99
  EXPECT_TRUE(rejects_last(g, kOpen + "tap<arg_key>index</arg_key><arg_value>-"));        // minimum 0
  EXPECT_TRUE(rejects_last(g, kOpen + "tap<arg_key>index</arg_key><arg_value>4."));       // an integer
  EXPECT_TRUE(rejects_last(g, kOpen + "tap</"));                                          // index is required
  EXPECT_TRUE(rejects_last(g, kOpen + "tap<arg_key>id"));                                 // undeclared key
  EXPECT_TRUE(rejects_last(g, kOpen + "tal"));                                            // unknown tool
  EXPECT_TRUE(rejects_last(g, kOpen + "name<arg_key>label</arg_key><arg_value>abcdef"));  // maxLength 5
  EXPECT_TRUE(rejects_last(g, kOpen + "name<arg_key>label</arg_key><arg_value>aB"));      // pattern
  EXPECT_TRUE(rejects_last(g, kOpen + "name" + arg("label", "a") + "<arg_key>score</arg_key><arg_value>3"));
  EXPECT_TRUE(rejects_last(g, kOpen + "type_text<arg_key>text</arg_key><arg_value>a<b"));   // no `<` in text
  EXPECT_TRUE(rejects_last(g, kOpen + "type_text<arg_key>text</arg_key><arg_value>\x80"));  // bad UTF-8
  EXPECT_TRUE(rejects_last(g, kOpen + "note<arg_key>meta</arg_key><arg_value>{\"tags\": [\"a<"));
  EXPECT_TRUE(rejects_last(g, kOpen + "note<arg_key>meta</arg_key><arg_value>{\"tags\": [\"abcd"));
  EXPECT_TRUE(rejects_last(g, kOpen + "note<arg_key>meta</arg_key><arg_value>{\"tags\": [\"a\",\"b\","));
  EXPECT_TRUE(rejects_last(g, kOpen + "note<arg_key>meta</arg_key><arg_value>{\"x"));  // additionalProperties
  EXPECT_TRUE(rejects_last(g, kOpen + "note<arg_key>mode</arg_key><arg_value>b"));  // "b<c" cannot be written
  EXPECT_TRUE(rejects_last(g, kOpen + "note" + arg("who", "null") + "<arg_key>me"));  // schema order
  EXPECT_TRUE(rejects_last(g, "x"));  // a forced call starts at once
}

TEST(ToolCallGrammar, OneCallOrSeveral) {
  const std::string call = kOpen + "tap" + arg("index", "1") + "</tool_call>";
  bool complete = false;
  EXPECT_EQ(taken(forced(false), call, &complete), call.size());
  EXPECT_TRUE(complete);
  EXPECT_TRUE(rejects_last(forced(false), call + "<"));
  EXPECT_TRUE(accepts(forced(true), call + call + kOpen + "get_time</tool_call>"));
}

TEST(ToolCallGrammar, AutoLeavesTextFreeUntilACallOpens) {
  ToolCallGrammarOptions o;
  o.free_text = true;
  o.parallel = false;
  const Grammar g = tool_call_grammar(tools(), o);
  EXPECT_TRUE(accepts(g, ""));
  EXPECT_TRUE(accepts(g, "Any text at all, <b>tags</b>, <tool_ca and \xff bytes."));
  const std::string call = kOpen + "tap" + arg("index", "7") + "</tool_call>";
  EXPECT_TRUE(accepts(g, "Let me tap. <tool_<tool_call>tap" + arg("index", "7") + "</tool_call>"));
  EXPECT_TRUE(accepts(g, call));
  EXPECT_TRUE(rejects_last(g, "text <tool_call>tap<arg_key>index</arg_key><arg_value>123"));
  EXPECT_TRUE(rejects_last(g, "text <tool_call>nop"));
  EXPECT_TRUE(rejects_last(g, call + "x"));  // a call ends the reply
  bool complete = true;
  taken(g, "a <tool_call>tap", &complete);
  EXPECT_FALSE(complete);  // an open call must be finished
}

TEST(ToolCallGrammar, ToolsWithoutSchemaKeepOnlyTheStructure) {
  ToolCallGrammarOptions o;
  o.free_text = true;
  const Grammar g =
      tool_call_grammar({{"free", Json::parse(R"({"properties": {"n": {"type": "integer"}}})"), false},
                         {"tap", tools()[1].parameters}},
                        o);
  EXPECT_TRUE(accepts(g, kOpen + "free" + arg("n", "not a number") + arg("other", "x") + "</tool_call>"));
  EXPECT_TRUE(rejects_last(g, kOpen + "free<arg_key>n</arg_key><arg_value>a<b"));
  EXPECT_TRUE(rejects_last(g, kOpen + "tap<arg_key>index</arg_key><arg_value>100"));
}

TEST(ToolCallGrammar, SchemasItCannotEnforceAreErrors) {
  ToolCallGrammarOptions o;
  EXPECT_THROW(tool_call_grammar({}, o), Error);
  EXPECT_THROW(tool_call_grammar({{"u", Json::parse(R"({"properties": {"v": {"type": "array",
      "uniqueItems": true}}})")}},
                                 o),
               Error);
  EXPECT_THROW(tool_call_grammar({{"a<b", Json()}}, o), Error);
  EXPECT_THROW(tool_call_grammar({{"r", Json::parse(R"({"anyOf": [{"properties": {}}]})")}}, o), Error);
}

TEST(ToolCallGrammar, StringOnlyParametersAreBareText) {
  EXPECT_TRUE(tool_parameter_is_text(Json::parse(R"({"type": "string"})")));
  EXPECT_TRUE(tool_parameter_is_text(Json::parse(R"({"enum": ["a", "b"]})")));
  EXPECT_TRUE(tool_parameter_is_text(Json::parse(R"({"anyOf": [{"type": "string"}, {"const": "x"}]})")));
  EXPECT_FALSE(tool_parameter_is_text(Json::parse(R"({"type": ["string", "null"]})")));
  EXPECT_FALSE(tool_parameter_is_text(Json::parse(R"({"enum": ["a", 1]})")));
  EXPECT_FALSE(tool_parameter_is_text(Json::parse(R"({})")));
}

namespace {

constexpr int32_t kEnd = 0;

// Id 0 ends generation; every single byte; the tool-call tags as single tokens; words and punctuation.
std::shared_ptr<const TokenVocab> tag_vocab() {
  std::vector<std::string> t{""};
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s :
       {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "tap",
        "index",       "type_text",    "text",      "name",       "label",       "score",        "note",
        "meta",        "tags",         "abc",       "12",         "-1",          "\"]",          "[\"",
        "{\"",         "\":",          "}",         "null",       "get_",        "time",         "</",
        "<arg",        "a<b",          "\xC3\xA9",  "\xF0\x9F",   "\x98\x80",    "  ",           "ing"}) {
    t.push_back(s);
  }
  return std::make_shared<const TokenVocab>(std::move(t), std::vector<int32_t>{kEnd});
}

bool bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

}  // namespace

TEST(ToolCallGrammar, MasksEqualTheSlowReferenceOnRandomWalks) {
  const auto vocab = tag_vocab();
  for (bool free_text : {false, true}) {
    ToolCallGrammarOptions o;
    o.free_text = free_text;
    const auto g = std::make_shared<const CompiledGrammar>(tool_call_grammar(tools(), o), vocab);
    std::mt19937 rng(5);
    std::vector<uint64_t> bits;
    for (int walk = 0; walk < 12; ++walk) {
      GrammarMatcher m(g);
      std::string text;
      for (int step = 0; step < 120 && !m.ended(); ++step) {
        const size_t n = m.fill_mask(bits);
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
          ASSERT_EQ(bit(bits, id), m.allows_token(id)) << "token '" << vocab->bytes(id) << "' after " << text;
          if (bit(bits, id)) allowed.push_back(id);
        }
        ASSERT_EQ(n, allowed.size());
        ASSERT_FALSE(allowed.empty()) << text;
        // The budget filter against its reference: each allowed token run through a copy of the matcher.
        for (uint32_t budget : {0u, 3u, 25u}) {
          std::vector<uint64_t> narrowed = bits;
          const size_t kept = m.restrict_to_budget(narrowed, budget);
          size_t expected = 0;
          for (int32_t id : allowed) {
            GrammarMatcher after = m;
            const bool keep =
                id == kEnd || (after.advance(vocab->bytes(id)) && after.min_completion_bytes() <= budget);
            expected += keep ? 1 : 0;
            ASSERT_EQ(bit(narrowed, id), keep)
                << "budget " << budget << " token '" << vocab->bytes(id) << "' after " << text;
          }
          ASSERT_EQ(kept, expected);
        }
        // Prefer the tags and words now and then, so walks get into the calls.
        int32_t pick = allowed[rng() % allowed.size()];
        for (int tries = 0; tries < 8 && vocab->bytes(pick).size() < 2; ++tries)
          pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept_token(pick));
        text += vocab->bytes(pick);
      }
    }
  }
}

TEST(ToolCallGrammar, ShortestCompletionIsPlannedInWholeTokens) {
  const auto vocab = tag_vocab();
  const auto g = std::make_shared<const CompiledGrammar>(forced(), vocab);
  GrammarMatcher m(g);
  const std::string text = m.shortest_completion();
  EXPECT_TRUE(accepts(forced(), text)) << text;
  const std::vector<int32_t> plan = m.shortest_completion_tokens();
  std::string spelled;
  for (int32_t id : plan) spelled += vocab->bytes(id);
  EXPECT_EQ(spelled, text);
  // `<tool_call>note</tool_call>` (the shortest call: nothing required) in three tokens, not 27 bytes.
  EXPECT_EQ(text, kOpen + "note</tool_call>");
  EXPECT_EQ(plan.size(), 3u);
  // Part-way into a call, the plan finishes that call.
  ASSERT_TRUE(m.advance(kOpen + "tap<arg_key>index</arg_key><arg_value>4"));
  EXPECT_EQ(m.shortest_completion(), "</arg_value></tool_call>");
  EXPECT_EQ(m.shortest_completion_tokens().size(), 2u);
}

}  // namespace spark::grammar
