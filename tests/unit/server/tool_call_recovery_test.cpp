// The model sometimes leaves the Spark syntax; each fixture is one way it does, with the recoveries that must
// be reported. Every fixture runs at every chunking (see check_tool_fixture).
#include <gtest/gtest.h>

#include "parser_test_util.h"
#include "server/tool_call_parser.h"

namespace spark {

namespace {

const std::vector<test::ToolFixture>& recovery_fixtures() {
  static const std::vector<test::ToolFixture> fixtures = {
      // Seen in the wild: a bracketed name, then an unterminated wrapper object.
      {"bracketed_unterminated_wrapper",
       R"([tap]{"tool": "tap", "parameters": {"index": 1})",
       "",
       {{"tap", R"({"index":1})"}},
       {"repaired_json", "bracketed_call"}},
      {"bracketed_arguments",
       R"([tap] {"index": 2} ok)",
       " ok",
       {{"tap", R"({"index":2})"}},
       {"bracketed_call"}},
      {"bracketed_newline_gap",
       "[tap]\n{\"index\": 4}\nDone",
       "\nDone",
       {{"tap", R"({"index":4})"}},
       {"bracketed_call"}},
      {"bracketed_unknown_tool", R"([launch]{"x": 1} ok)", R"([launch]{"x": 1} ok)", {}, {"unknown_tool"}},
      {"bracketed_unparsable",
       R"([tap]{"index": 1 and then)",
       R"([tap]{"index": 1 and then)",
       {},
       {"unparsable_tool_call"}},
      {"bare_json_name_arguments",
       R"({"name": "get_weather", "arguments": {"city": "Oslo"}})",
       "",
       {{"get_weather", R"({"city":"Oslo"})"}},
       {"bare_json_call"}},
      {"bare_json_tool_parameters",
       R"(I'll tap. {"tool": "tap", "parameters": {"index": 1}})",
       "I'll tap. ",
       {{"tap", R"({"index":1})"}},
       {"bare_json_call"}},
      {"bare_json_unknown_tool",
       R"({"name": "launch_rocket", "arguments": {}})",
       R"({"name": "launch_rocket", "arguments": {}})",
       {},
       {"unknown_tool"}},
      {"bare_json_unterminated",
       R"({"name": "tap", "arguments": {"index": 3})",
       "",
       {{"tap", R"({"index":3})"}},
       {"repaired_json", "bare_json_call"}},
      {"bare_json_unterminated_string",
       R"({"name": "type_text", "arguments": {"text": "hel)",
       "",
       {{"type_text", R"({"text":"hel"})"}},
       {"repaired_json", "bare_json_call"}},
      {"bare_json_openai_shape",
       R"({"type": "function", "function": {"name": "tap", "arguments": "{\"index\": 2}"}})",
       "",
       {{"tap", R"({"index":2})"}},
       {"bare_json_call"}},
      {"bare_json_cut_by_tag",
       R"({"name": "tap", "arguments": {"index": 1}<tool_call>get_time</tool_call>)",
       "",
       {{"tap", R"({"index":1})"}, {"get_time", "{}"}},
       {"repaired_json", "bare_json_call"}},
      {"bare_json_data_with_a_name",
       R"(Person: {"name": "Ann", "age": 3}; tool: {"name": "tap"}.)",
       R"(Person: {"name": "Ann", "age": 3}; tool: {"name": "tap"}.)",
       {},
       {}},
      {"bare_json_not_a_call_at_end", R"(x {"name": 1, "arguments")", R"(x {"name": 1, "arguments")", {}, {}},
      {"glm_newlines",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</"
       "arg_key>\n"
       "<arg_value>2</arg_value>\n</tool_call>",
       "",
       {{"get_weather", R"({"city":"Paris","days":2})"}},
       {"glm_whitespace"}},
      {"missing_arg_value_open",
       "<tool_call>tap<arg_key>index</arg_key>5</arg_value></tool_call>",
       "",
       {{"tap", R"({"index":5})"}},
       {"missing_arg_value_open"}},
      {"stray_arg_key_close",
       "<tool_call>tap<arg_key>index</arg_key></arg_key><arg_value>6</arg_value></tool_call>",
       "",
       {{"tap", R"({"index":6})"}},
       {"stray_arg_key_close"}},
      {"arg_key_close_ends_value",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value>hi</arg_key></tool_call>",
       "",
       {{"type_text", R"({"text":"hi"})"}},
       {"stray_arg_key_close"}},
      {"missing_tool_call_close_at_end",
       "<tool_call>tap<arg_key>index</arg_key><arg_value>7</arg_value>",
       "",
       {{"tap", R"({"index":7})"}},
       {"missing_tool_call_close"}},
      {"cut_off_in_string_value",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value>hello wor",
       "",
       {{"type_text", R"({"text":"hello wor"})"}},
       {"missing_arg_value_close", "missing_tool_call_close"}},
      {"missing_tool_call_close_between_calls",
       "<tool_call>tap<arg_key>index</arg_key><arg_value>1</arg_value><tool_call>get_time</tool_call>",
       "",
       {{"tap", R"({"index":1})"}, {"get_time", "{}"}},
       {"missing_tool_call_close"}},
      {"unknown_tool_stays_text",
       "<tool_call>launch<arg_key>x</arg_key><arg_value>1</arg_value></tool_call> ok",
       "<tool_call>launch<arg_key>x</arg_key><arg_value>1</arg_value></tool_call> ok",
       {},
       {"unknown_tool"}},
      {"json_in_tool_call",
       R"(<tool_call>{"name": "tap", "arguments": {"index": 8}}</tool_call>)",
       "",
       {{"tap", R"({"index":8})"}},
       {"json_in_tool_call"}},
      {"json_in_tool_call_missing_brace",
       R"(<tool_call>{"name": "tap", "arguments": {"index": 8}</tool_call>)",
       "",
       {{"tap", R"({"index":8})"}},
       {"repaired_json", "json_in_tool_call"}},
      {"json_in_tool_call_unknown",
       R"(<tool_call>{"name": "nope", "arguments": {}}</tool_call>.)",
       R"(<tool_call>{"name": "nope", "arguments": {}}</tool_call>.)",
       {},
       {"unknown_tool"}},
      {"json_arguments_after_name",
       R"(<tool_call>tap{"index": 9}</tool_call>)",
       "",
       {{"tap", R"({"index":9})"}},
       {"json_arguments"}},
      {"missing_arg_value_close_before_next_key",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome<arg_key>days</arg_key><arg_value>2"
       "</arg_value></tool_call>",
       "",
       {{"get_weather", R"({"city":"Rome","days":2})"}},
       {"missing_arg_value_close"}},
      {"missing_arg_key_close",
       "<tool_call>tap<arg_key>index<arg_value>1</arg_value></tool_call>",
       "",
       {{"tap", R"({"index":1})"}},
       {"missing_arg_key_close"}},
      {"missing_arg_key_open",
       "<tool_call>tap index</arg_key><arg_value>1</arg_value></tool_call>",
       "",
       {{"tap", R"({"index":1})"}},
       {"glm_whitespace", "missing_arg_key_open"}},
      {"type_mismatch_and_coercion",
       "<tool_call>type_text<arg_key>text</arg_key><arg_value>hi</arg_value><arg_key>submit</arg_key>"
       "<arg_value>True</arg_value></tool_call><tool_call>tap<arg_key>index</arg_key><arg_value>first"
       "</arg_value></tool_call>",
       "",
       {{"type_text", R"({"text":"hi","submit":true})"}, {"tap", R"({"index":"first"})"}},
       {"argument_coerced", "argument_type_mismatch"}},
      {"duplicate_argument",
       "<tool_call>tap<arg_key>index</arg_key><arg_value>1</arg_value><arg_key>index</arg_key><arg_value>2"
       "</arg_value></tool_call>",
       "",
       {{"tap", R"({"index":1})"}},
       {"duplicate_argument"}},
      {"empty_tool_call",
       "<tool_call></tool_call>x",
       "<tool_call></tool_call>x",
       {},
       {"unparsable_tool_call"}},
      {"tool_call_tag_at_end", "Sure <tool_call>", "Sure <tool_call>", {}, {"unparsable_tool_call"}},
      {"dropped_text_in_call",
       "<tool_call>tap junk<arg_key>index</arg_key><arg_value>1</arg_value></tool_call>",
       "",
       {{"tap", R"({"index":1})"}},
       {"glm_whitespace", "dropped_text"}},
      {"unterminated_key_at_end",
       "<tool_call>tap<arg_key>ind",
       "",
       {{"tap", "{}"}},
       {"unterminated_arg_key", "missing_tool_call_close"}},
      {"key_without_value",
       "<tool_call>tap<arg_key>index</arg_key></tool_call>",
       "",
       {{"tap", "{}"}},
       {"missing_arg_value"}},
  };
  return fixtures;
}

}  // namespace

TEST(ToolCallRecovery, EveryFixtureAtEveryChunking) {
  const nlohmann::json tools = test::test_tools();
  for (const test::ToolFixture& f : recovery_fixtures()) test::check_tool_fixture(f, tools);
}

TEST(ToolCallRecovery, RecordsNameTheirSubject) {
  const test::ToolRun run =
      test::run_tools(test::test_tools(), true, {"<tool_call>launch</tool_call>[tap]{\"tool\": \"tap\""});
  ASSERT_EQ(run.recoveries.size(), 3u);
  EXPECT_EQ(run.recoveries[0], (ParseRecovery{"unknown_tool", "launch"}));
  EXPECT_EQ(run.recoveries[1].kind, "repaired_json");
  EXPECT_EQ(run.recoveries[1].detail, "closed with '}'");
  EXPECT_EQ(run.recoveries[2], (ParseRecovery{"bracketed_call", "tap"}));
  ASSERT_EQ(run.message.tool_calls.size(), 1u);
  EXPECT_EQ(run.message.tool_calls[0].arguments, "{}");
}

}  // namespace spark
