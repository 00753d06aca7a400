#include "model/generation_config.h"

#include <gtest/gtest.h>

#include "spark/error.h"

namespace spark {

TEST(GenerationConfig, ReadsSamplingDefaultsAndEosIds) {
  const GenerationConfig g = parse_generation_config(
      R"({"bos_token_id": 0, "eos_token_id": [1, 7], "do_sample": true, "temperature": 0.6, "top_p": 0.95,
          "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.05, "max_new_tokens": 256,
          "transformers_version": "4.57.0"})",
      "generation_config.json");
  EXPECT_EQ(*g.temperature, 0.6);
  EXPECT_EQ(*g.top_p, 0.95);
  EXPECT_EQ(*g.top_k, 20);
  EXPECT_EQ(*g.min_p, 0.05);
  EXPECT_EQ(*g.repetition_penalty, 1.05);
  EXPECT_EQ(*g.max_new_tokens, 256);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(
      g.sampling_json().dump(),
      R"({"temperature":0.6,"top_p":0.95,"top_k":20,"min_p":0.05,"repetition_penalty":1.05,"max_tokens":256})");
}

TEST(GenerationConfig, AbsentFieldsStayUnset) {
  const GenerationConfig g = parse_generation_config(R"({"eos_token_id": 1, "temperature": null})", "g.json");
  EXPECT_FALSE(g.temperature);
  EXPECT_FALSE(g.top_p);
  EXPECT_FALSE(g.top_k);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{1}));
  EXPECT_TRUE(g.sampling_json().empty());
  // top_k -1 means "off", as in requests.
  EXPECT_EQ(*parse_generation_config(R"({"top_k": -1})", "g.json").top_k, 0);
}

TEST(GenerationConfig, BadValuesNameTheFileAndKey) {
  for (const char* text :
       {R"({"temperature": "hot"})", R"({"temperature": 9})", R"({"top_p": 0})", R"({"top_k": 1.5})",
        R"({"eos_token_id": ["x"]})", R"({"eos_token_id": -3})", R"({"repetition_penalty": 0})", R"([1, 2])",
        R"({not json)", R"({"temperature": 1e999})"}) {
    try {
      parse_generation_config(text, "dir/generation_config.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("dir/generation_config.json"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

// A checkpoint's file like any other from outside: too deep is one line, before anything walks it (an
// error message dumping a 100 000-deep value overflowed the stack).
TEST(GenerationConfig, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& text : {"{\"temperature\": " + deep + "}", "{\"x\": " + deep + "}"}) {
    try {
      parse_generation_config(text, "dir/generation_config.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("dir/generation_config.json: not valid JSON"), std::string::npos) << msg;
      EXPECT_NE(msg.find("nested deeper than 128 levels"), std::string::npos) << msg;
    }
  }
}

}  // namespace spark
