#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include "parser_test_util.h"
#include "spark/error.h"

namespace spark {

namespace {

std::string args_of(const nlohmann::ordered_json& object) {
  return object.dump();
}

const std::vector<test::ToolFixture>& format_fixtures() {
  static const std::string kTricky = "He said \"hi\"\n\ttab \\ back \x01 caf\xc3\xa9 \xf0\x9f\x98\x80 end";
  static const std::vector<test::ToolFixture> fixtures = {
      {"plain_text",
       "Hello world. a < b, x > y, [1] and {braces} and [x]({y})",
       "Hello world. a < b, x > y, [1] and {braces} and [x]({y})",
       {},
       {}},
      {"single_call",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
       "<arg_value>3</arg_value></tool_call>",
       "",
       {{"get_weather", R"({"city":"Paris","days":3})"}},
       {}},
      {"content_then_two_calls",
       "Let me check.<tool_call>tap<arg_key>index</arg_key><arg_value>4</arg_value></tool_call>"
       "<tool_call>get_time</tool_call>",
       "Let me check.",
       {{"tap", R"({"index":4})"}, {"get_time", "{}"}},
       {}},
      {"zero_arg_call", "<tool_call>get_time</tool_call>", "", {{"get_time", "{}"}}, {}},
      {"typed_values",
       "<tool_call>set_alarm<arg_key>time</arg_key><arg_value>07:30</arg_value><arg_key>labels</arg_key>"
       "<arg_value>[\"work\", \"gym\"]</arg_value><arg_key>options</arg_key><arg_value>{\"repeat\": true}"
       "</arg_value><arg_key>snooze</arg_key><arg_value>null</arg_value></tool_call>",
       "",
       {{"set_alarm", R"({"time":"07:30","labels":["work","gym"],"options":{"repeat":true},"snooze":null})"}},
       {}},
      {"string_values_stay_raw",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value>123</arg_value><arg_key>submit</arg_key>"
       "<arg_value>false</arg_value></tool_call>",
       "",
       {{"type_text", R"({"text":"123","submit":false})"}},
       {}},
      {"string_escaping",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value>" + kTricky + "</arg_value></tool_call>",
       "",
       {{"type_text", args_of({{"text", kTricky}})}},
       {}},
      {"lt_inside_string_value",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value>a <b> c </arg d <tool "
       "x</arg_value></tool_call>",
       "",
       {{"type_text", R"({"text":"a <b> c </arg d <tool x"})"}},
       {}},
      {"empty_string_value",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value></arg_value></tool_call>",
       "",
       {{"type_text", R"({"text":""})"}},
       {}},
      {"number_enum_nullable",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>New York</arg_value><arg_key>units</arg_key>"
       "<arg_value>f</arg_value><arg_key>lat</arg_key><arg_value>40.7</arg_value><arg_key>note</arg_key>"
       "<arg_value>null</arg_value></tool_call>",
       "",
       {{"get_weather", R"({"city":"New York","units":"f","lat":40.7,"note":null})"}},
       {}},
      {"nullable_string_keeps_text",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value><arg_key>note</arg_key>"
       "<arg_value>sunny?</arg_value></tool_call>",
       "",
       {{"get_weather", R"({"city":"Rome","note":"sunny?"})"}},
       {}},
      {"undeclared_params_json_else_string",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>X</arg_value><arg_key>extra</arg_key>"
       "<arg_value>[1, 2]</arg_value><arg_key>other</arg_key><arg_value>hello</arg_value></tool_call>",
       "",
       {{"get_weather", R"({"city":"X","extra":[1,2],"other":"hello"})"}},
       {}},
      {"untyped_param",
       "<tool_call>remember<arg_key>content</arg_key><arg_value>{\"k\": [true]}</arg_value></tool_call>"
       "<tool_call>remember<arg_key>content</arg_key><arg_value>plain words</arg_value></tool_call>",
       "",
       {{"remember", R"({"content":{"k":[true]}})"}, {"remember", R"({"content":"plain words"})"}},
       {}},
      {"whitespace_between_and_after_calls_dropped",
       "<tool_call>get_time</tool_call>\n<tool_call>get_time</tool_call>\n",
       "",
       {{"get_time", "{}"}, {"get_time", "{}"}},
       {}},
      {"text_after_call", "<tool_call>get_time</tool_call> Done.", " Done.", {{"get_time", "{}"}}, {}},
      {"partial_tags_in_text",
       "a <tool_cal b </tool_call> c <tool_call",
       "a <tool_cal b </tool_call> c <tool_call",
       {},
       {}},
      {"brackets_and_data_objects_are_text",
       R"(See [tap](http://x) and [tap] then {"a": {"name": "tap", "arguments": {}}} and {"b": "<tool_"} end)",
       R"(See [tap](http://x) and [tap] then {"a": {"name": "tap", "arguments": {}}} and {"b": "<tool_"} end)",
       {},
       {}},
      {"calls_disabled",
       "x<tool_call>tap<arg_key>index</arg_key><arg_value>1</arg_value></tool_call>{\"name\": \"tap\"}",
       "x<tool_call>tap<arg_key>index</arg_key><arg_value>1</arg_value></tool_call>{\"name\": \"tap\"}",
       {},
       {},
       false},
  };
  return fixtures;
}

}  // namespace

TEST(ToolCallParser, FormatFixturesAtEveryChunking) {
  const nlohmann::json tools = test::test_tools();
  for (const test::ToolFixture& f : format_fixtures()) test::check_tool_fixture(f, tools);
}

TEST(ToolCallParser, WithoutToolsEveryCallIsTextAndReported) {
  test::ToolFixture f{"no_tools",
                      "<tool_call>tap<arg_key>index</arg_key><arg_value>1</arg_value></tool_call>",
                      "<tool_call>tap<arg_key>index</arg_key><arg_value>1</arg_value></tool_call>",
                      {},
                      {"unknown_tool"}};
  test::check_tool_fixture(f, nlohmann::json::array());
  test::check_tool_fixture(f, nullptr);
}

TEST(ToolCallParser, StreamsStringValuesAndHoldsOnlyPartialTags) {
  ToolCallParser parser(test::test_tools(), true, seeded_call_ids(1));
  ToolParseDelta d = parser.feed("Sure. <tool_");
  EXPECT_EQ(d.content, "Sure. ");
  EXPECT_TRUE(d.tool_calls.empty());
  d = parser.feed("call>type_te");
  EXPECT_TRUE(d.empty());  // the name may still grow
  d = parser.feed("xt<arg_key>text</arg_key><arg_value>Hello wo");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 0u);
  EXPECT_EQ(d.tool_calls[0].name, "type_text");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"text":"Hello wo)");
  d = parser.feed("rld</arg_");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_TRUE(d.tool_calls[0].id.empty());
  EXPECT_EQ(d.tool_calls[0].arguments, "rld");
  d = parser.feed("value></tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "\"}");
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_TRUE(parser.has_calls());
  EXPECT_EQ(parser.call_count(), 1u);
  EXPECT_TRUE(parser.recoveries().empty());
}

TEST(ToolCallParser, HoldsJsonAndBracketsOnlyWhileTheyMayBeACall) {
  ToolCallParser parser(test::test_tools(), true, seeded_call_ids(1));
  EXPECT_EQ(parser.feed("Data: {\"a").content, "Data: ");    // the first key decides
  EXPECT_EQ(parser.feed("\": 1, ").content, "{\"a\": 1, ");  // a data key: released and passed through
  EXPECT_EQ(parser.feed("\"name\": 2} and { x").content, "\"name\": 2} and { x");
  EXPECT_EQ(parser.feed(" [ta").content, " ");  // may become `[tap]{...}`
  EXPECT_EQ(parser.feed("p] now").content, "[tap] now");
  EXPECT_EQ(parser.feed(" {\"name\": \"ta").content, " ");  // may be a call
  EXPECT_EQ(parser.feed("p\", \"arguments\": {\"index\": 1").content, "");
  ToolParseDelta d = parser.feed("}}");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "tap");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"index":1})");
  EXPECT_TRUE(parser.finish().empty());
  ASSERT_EQ(parser.recoveries().size(), 1u);
  EXPECT_EQ(parser.recoveries()[0], (ParseRecovery{"bare_json_call", "tap"}));
}

TEST(ToolCallParser, NonStringValuesAreSentWhenComplete) {
  ToolCallParser parser(test::test_tools(), true, seeded_call_ids(1));
  ToolParseDelta d = parser.feed("<tool_call>tap<arg_key>index</arg_key><arg_value>1");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "");  // 12 may follow
  d = parser.feed("2</arg_value>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"index":12)");
}

TEST(ToolCallParser, FirstDeltaHasOpenAIShape) {
  ToolCallParser parser(test::test_tools(), true, seeded_call_ids(3));
  ToolParseDelta d = parser.feed("<tool_call>get_time</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  const nlohmann::json j = d.tool_calls[0].to_openai();
  EXPECT_EQ(j["index"], 0);
  EXPECT_EQ(j["type"], "function");
  EXPECT_EQ(j["function"]["name"], "get_time");
  EXPECT_EQ(j["function"]["arguments"], "{}");
  const std::string id = j["id"];
  ASSERT_EQ(id.size(), 29u);
  EXPECT_EQ(id.substr(0, 5), "call_");
  for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
}

TEST(ToolCallParser, CallIdsAreSeededOrRandom) {
  CallIdGenerator a = seeded_call_ids(42), b = seeded_call_ids(42), c = seeded_call_ids(43);
  const std::string first = a();
  EXPECT_EQ(first, b());
  EXPECT_NE(first, c());
  EXPECT_NE(a(), first);
  CallIdGenerator r1 = random_call_ids(), r2 = random_call_ids();
  EXPECT_NE(r1(), r2());
}

TEST(ToolCallParser, MalformedToolsAreUserErrors) {
  EXPECT_THROW(ToolCallParser(nlohmann::json::object(), true), Error);
  EXPECT_THROW(ToolCallParser(nlohmann::json::parse(R"([{"type": "function"}])"), true), Error);
  EXPECT_THROW(
      ToolCallParser(nlohmann::json::parse(R"([{"type": "retrieval", "function": {"name": "a"}}])"), true),
      Error);
  EXPECT_THROW(ToolCallParser(nlohmann::json::parse(R"([{"function": {"name": ""}}])"), true), Error);
  EXPECT_THROW(
      ToolCallParser(nlohmann::json::parse(R"([{"function": {"name": "a", "parameters": 3}}])"), true),
      Error);
  EXPECT_NO_THROW(ToolCallParser(nlohmann::json::parse(R"([{"function": {"name": "a"}}])"), true));
}

TEST(ToolCallParser, ValueConversionFollowsTheSchemaType) {
  EXPECT_EQ(convert_argument(" 42 ", kJsonInteger).value, 42);
  EXPECT_EQ(convert_argument("42", kJsonString).value, "42");
  EXPECT_EQ(convert_argument("4.5", kJsonNumber).value, 4.5);
  EXPECT_EQ(convert_argument("4", kJsonNumber).value, 4);
  EXPECT_EQ(convert_argument("4.0", kJsonInteger).fit, ArgumentValue::Fit::kExact);
  EXPECT_EQ(convert_argument("4.5", kJsonInteger).fit, ArgumentValue::Fit::kMismatch);
  EXPECT_EQ(convert_argument("true", kJsonBoolean).value, true);
  EXPECT_EQ(convert_argument("False", kJsonBoolean).value, false);
  EXPECT_EQ(convert_argument("False", kJsonBoolean).fit, ArgumentValue::Fit::kCoerced);
  EXPECT_EQ(convert_argument("None", kJsonNull | kJsonInteger).value, nullptr);
  EXPECT_EQ(convert_argument("[1]", kJsonArray).value, nlohmann::ordered_json::parse("[1]"));
  EXPECT_EQ(convert_argument("[1]", kJsonObject).fit, ArgumentValue::Fit::kMismatch);
  EXPECT_EQ(convert_argument("{\"a\": 1}", 0).value, nlohmann::ordered_json::parse("{\"a\": 1}"));
  EXPECT_EQ(convert_argument("not json", 0).value, "not json");
  EXPECT_EQ(convert_argument("7", kJsonString | kJsonNull).value, "7");
  EXPECT_EQ(convert_argument("null", kJsonString | kJsonNull).value, nullptr);
}

TEST(ToolCallParser, SchemaTypesReadsTypeEnumConstAndUnions) {
  using nlohmann::json;
  EXPECT_EQ(schema_types(json::parse(R"({"type": "integer"})")), kJsonInteger);
  EXPECT_EQ(schema_types(json::parse(R"({"type": ["string", "null"]})")), kJsonString | kJsonNull);
  EXPECT_EQ(schema_types(json::parse(R"({"enum": ["a", 1]})")), kJsonString | kJsonInteger);
  EXPECT_EQ(schema_types(json::parse(R"({"const": true})")), kJsonBoolean);
  EXPECT_EQ(schema_types(json::parse(R"({"anyOf": [{"type": "number"}, {"type": "null"}]})")),
            kJsonNumber | kJsonNull);
  EXPECT_EQ(schema_types(json::parse(R"({"anyOf": [{"type": "number"}, {}]})")), 0);
  EXPECT_EQ(schema_types(json::parse(R"({"properties": {}})")), kJsonObject);
  EXPECT_EQ(schema_types(json::parse(R"({})")), 0);
}

TEST(ToolCallParser, EscapingMatchesNlohmannDump) {
  std::string all;
  for (int c = 1; c < 128; ++c) all += static_cast<char>(c);
  all += "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  std::string escaped = "\"";
  append_json_escaped(escaped, all);
  escaped += '"';
  EXPECT_EQ(escaped, nlohmann::json(all).dump());
}

}  // namespace spark
