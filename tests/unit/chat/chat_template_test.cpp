// The public chat-template API: apply_chat_template's context, loading a model's template, Spark's own
// default template rendering the format in the spec, and concurrent rendering.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "chat/chat_template_loader.h"
#include "chat/default_template.h"
#include "jinja_test_util.h"

namespace spark {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

const std::string kBos = "<｜start▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("spark-chat-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  fs::path path_;
};

TEST(ApplyChatTemplate, BuildsTheContextHuggingFacePasses) {
  ChatTemplate tmpl(
      "{{ bos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|"
      "{{ messages|length }}|{{ enable_thinking }}|{{ eos_token }}");
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(apply_chat_template(tmpl, messages, nullptr, true, {{"enable_thinking", false}},
                                {{"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            "<s>|True|True|True|1|False|</s>");
  // Extra kwargs win over special tokens, as in {**special_tokens_map, **kwargs}.
  EXPECT_EQ(apply_chat_template(tmpl, messages, ordered_json::array(), false,
                                {{"bos_token", "B"}, {"enable_thinking", true}}, {{"bos_token", "<s>"}}),
            "B|False|True|False|1|True|");
  EXPECT_THROW(apply_chat_template(tmpl, messages, nullptr, false, {{"messages", 1}}), Error);
}

TEST(LoadChatTemplate, PrefersOverrideThenJinjaFileThenTokenizerConfig) {
  TempDir dir;
  dir.write("tokenizer_config.json",
            R"({"chat_template": "from config", "bos_token": {"content": "<s>", "lstrip": false},
                "eos_token": "</s>", "pad_token": null, "additional_special_tokens": ["<x>", {"content": "<y>"}]})");
  ChatTemplateSource source = load_chat_template(dir.path());
  EXPECT_EQ(source.text, "from config");
  EXPECT_EQ(source.special_tokens.dump(),
            R"({"bos_token":"<s>","eos_token":"</s>","additional_special_tokens":["<x>","<y>"]})");
  dir.write("chat_template.jinja", "from jinja file");
  EXPECT_EQ(load_chat_template(dir.path()).text, "from jinja file");
  dir.write("override.jinja", "from override");
  source = load_chat_template(dir.path(), dir.path() / "override.jinja");
  EXPECT_EQ(source.text, "from override");
  EXPECT_EQ(source.origin, (dir.path() / "override.jinja").string());
}

TEST(LoadChatTemplate, NamedTemplatesPickDefaultAndToolUse) {
  TempDir dir;
  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "TOOLS {{ tools|length }}"},
                                  {"name": "default", "template": "DEFAULT {{ bos_token }}"}],
                "bos_token": "<s>"})");
  ChatFormatter formatter(load_chat_template(dir.path()));
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(formatter.apply(messages, nullptr, true), "DEFAULT <s>");
  EXPECT_EQ(formatter.apply(messages, ordered_json::parse("[{}, {}]"), true), "TOOLS 2");
}

TEST(LoadChatTemplate, ErrorsNameTheFile) {
  TempDir dir;
  try {
    load_chat_template(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
  dir.write("tokenizer_config.json", "{not json");
  try {
    load_chat_template(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
  }
  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "other", "template": "x"}]})");
  EXPECT_THROW(load_chat_template(dir.path()), Error);
  dir.write("tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  EXPECT_THROW(ChatFormatter(load_chat_template(dir.path())), TemplateError);
}

std::string spark_render(const std::string& messages, const std::string& tools, bool generation_prompt,
                         const ordered_json& kwargs = ordered_json::object()) {
  static const ChatTemplate tmpl(spark_default_chat_template());
  return apply_chat_template(tmpl, ordered_json::parse(messages), ordered_json::parse(tools),
                             generation_prompt, kwargs);
}

TEST(SparkDefaultTemplate, SingleUserTurnWithGenerationPrompt) {
  EXPECT_EQ(spark_render(R"([{"role": "user", "content": "Hi"}])", "null", true),
            kBos + "<|System|>\nyou are a helpful assistant." + kEos + kBos + "<|User|>Hi" + kEos + kBos +
                "<|Bot|><think>");
  EXPECT_EQ(
      spark_render(R"([{"role": "user", "content": "Hi"}])", "null", true, {{"enable_thinking", false}}),
      kBos + "<|System|>\nyou are a helpful assistant." + kEos + kBos + "<|User|>Hi" + kEos + kBos +
          "<|Bot|></think>");
  EXPECT_EQ(spark_render(R"([{"role": "user", "content": "Hi"}])", "null", false),
            kBos + "<|System|>\nyou are a helpful assistant." + kEos + kBos + "<|User|>Hi" + kEos);
}

TEST(SparkDefaultTemplate, ToolsSystemReasoningToolCallsAndToolResults) {
  const std::string tools =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Météo",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";
  const std::string messages = R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather "}, {"type": "text", "text": "in Paris?"}]},
    {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                     "arguments": {"city": "Paris", "days": 2, "opts": {"unit": "C"}}}}]},
    {"role": "tool", "content": "sunny"},
    {"role": "tool", "content": "{\"t\": 21}"},
    {"role": "assistant", "content": "Sunny, 21°C."},
    {"role": "system", "content": "Later system."}
  ])";
  const std::string expected =
      kBos +
      "<|System|>\nyou are a helpful assistant.## Tools\nYou have access to the following "
      "functions:\n<tools>\n" +
      R"({"name": "get_weather", "description": "Météo", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})" +
      "\n</tools>\n\nBe brief." + kEos +                                     //
      kBos + "<|User|>Weather in Paris?" + kEos +                            //
      kBos + "<|Bot|><think>Need the tool.</think><tool_call>get_weather" +  //
      "<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2</arg_value>" +
      R"(<arg_key>opts</arg_key><arg_value>{"unit": "C"}</arg_value></tool_call>)" + kEos +  //
      kBos + "<|Tool|><tool_response>sunny</tool_response><tool_response>{\"t\": 21}</tool_response>" + kEos +
      kBos + "<|Bot|></think>Sunny, 21°C." + kEos +  //
      kBos + "<|System|>\nLater system." + kEos +    //
      kBos + "<|Bot|><think>";
  EXPECT_EQ(spark_render(messages, tools, true, {{"enable_thinking", true}}), expected);
}

TEST(SparkDefaultTemplate, RejectsWhatTheFormatCannotExpress) {
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "The conversation is empty: at least one message is required."},
      {R"([{"role": "developer", "content": "x"}])", "Unsupported message role: developer"},
      {R"([{"role": "user", "content": [{"type": "image_url"}]}])",
       "Unsupported user content block type: image_url"},
      {R"([{"role": "user", "content": 5}])", "user content must be a string or a list of text blocks"},
      {R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
          "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]}])",
       "Tool call arguments must be a JSON object (decode argument strings first)."},
  };
  for (const auto& [messages, message] : cases) {
    try {
      spark_render(messages, "null", true);
      ADD_FAILURE() << messages;
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), TemplateError::Kind::kRaised) << messages;
      EXPECT_EQ(e.detail(), message);
    }
  }
}

TEST(ChatTemplateConcurrency, OneParsedTemplateRendersFromManyThreads) {
  const ChatTemplate tmpl(spark_default_chat_template());
  const ordered_json messages = ordered_json::parse(
      R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "reasoning_content": "r"}])");
  const std::string expected = apply_chat_template(tmpl, messages, nullptr, true);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (apply_chat_template(tmpl, messages, nullptr, true) != expected) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace spark
