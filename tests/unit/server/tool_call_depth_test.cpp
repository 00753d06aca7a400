// Model output is outside input too: a call whose arguments nest 100000 levels deep must not overflow the
// stack in the tool-call parser (its JSON goes through util/bounded_json).
#include <gtest/gtest.h>

#include <string>

#include "server/tool_call_parser.h"
#include "util/bounded_json.h"

namespace spark {
namespace {

const nlohmann::json kTools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f",
  "parameters": {"type": "object", "properties": {"x": {"type": "array"}}}}}])");

ParsedMessage parse_all(const std::string& text) {
  ToolCallParser parser(kTools, true, seeded_call_ids(1));
  ParsedMessage m;
  // Feed in pieces, as a stream arrives.
  for (size_t at = 0; at < text.size(); at += 4096)
    m.append(parser.feed(std::string_view(text).substr(at, 4096)));
  m.append(parser.finish());
  return m;
}

std::string deep(size_t n) {
  return std::string(n, '[') + std::string(n, ']');
}

TEST(ToolCallDepth, DeepArgumentValueStaysBounded) {
  const ParsedMessage m =
      parse_all("<tool_call>f<arg_key>x</arg_key><arg_value>" + deep(100000) + "</arg_value></tool_call>");
  // Whatever the parser makes of it (a string value, content), no JSON it returns nests past the bound.
  for (const auto& c : m.tool_calls) {
    EXPECT_FALSE(json_depth_violation(c.arguments).has_value()) << c.arguments.substr(0, 200);
  }
}

TEST(ToolCallDepth, DeepBareJsonCallIsNotACall) {
  const ParsedMessage m = parse_all("{\"name\": \"f\", \"arguments\": {\"x\": " + deep(100000) + "}}");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ToolCallDepth, ShallowArgumentsStillParse) {
  const ParsedMessage m =
      parse_all("<tool_call>f<arg_key>x</arg_key><arg_value>" + deep(3) + "</arg_value></tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(m.tool_calls[0].arguments), nlohmann::json::parse(R"({"x": [[[]]]})"));
}

}  // namespace
}  // namespace spark
