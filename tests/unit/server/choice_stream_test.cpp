// parallel_tool_calls: false (ChoiceConfig::single_call) keeps the first call of a reply and drops the rest,
// in the streamed deltas and in the totals alike; without it every call comes through.
#include "server/choice_stream.h"

#include <gtest/gtest.h>

#include "tokenizer/synthetic_tokenizer.h"

namespace spark {
namespace {

nlohmann::json two_tools() {
  nlohmann::json tools = nlohmann::json::array();
  for (const char* name : {"f", "g"}) {
    nlohmann::json fn = nlohmann::json::object();
    fn["name"] = name;
    fn["parameters"] =
        nlohmann::json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
    nlohmann::json t = nlohmann::json::object();
    t["type"] = "function";
    t["function"] = fn;
    tools.push_back(t);
  }
  return tools;
}

struct Output {
  std::vector<ToolCallDelta> streamed;
  ParsedMessage message;
  std::string finish_reason;
};

Output generate(const Tokenizer& tok, bool single_call) {
  ChoiceConfig config;
  config.chat = true;
  config.tools = two_tools();
  config.calls_enabled = true;
  config.single_call = single_call;
  ChoiceStream stream(tok, config);
  const std::string text =
      "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"
      "<tool_call>g<arg_key>a</arg_key><arg_value>2</arg_value></tool_call>";
  Output run;
  for (int32_t id : tok.encode(text)) {  // one token a step, as a stream sees them
    TokenEvent ev;
    ev.token = id;
    ChoiceDelta d = stream.on_tokens({ev});
    run.streamed.insert(run.streamed.end(), d.tool_calls.begin(), d.tool_calls.end());
  }
  ChoiceDelta tail = stream.finish(FinishReason::kStop);
  run.streamed.insert(run.streamed.end(), tail.tool_calls.begin(), tail.tool_calls.end());
  run.message = stream.message();
  run.finish_reason = stream.finish_reason();
  return run;
}

TEST(ChoiceStream, SingleCallKeepsTheFirstCallOnly) {
  const Tokenizer tok = Tokenizer::from_json(synthetic_tokenizer_json(512, 1));
  const Output all = generate(tok, false);
  ASSERT_EQ(all.message.tool_calls.size(), 2u);
  EXPECT_EQ(all.message.tool_calls[1].name, "g");

  const Output one = generate(tok, true);
  ASSERT_EQ(one.message.tool_calls.size(), 1u);
  EXPECT_EQ(one.message.tool_calls[0].name, "f");
  EXPECT_EQ(nlohmann::json::parse(one.message.tool_calls[0].arguments)["a"], 1);
  for (const auto& d : one.streamed) EXPECT_EQ(d.index, 0u);
  EXPECT_EQ(one.finish_reason, "tool_calls");
}

}  // namespace
}  // namespace spark
