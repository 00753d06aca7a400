#include "util/bounded_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/safetensors.h"
#include "spark/error.h"
#include "spark/model_config.h"
#include "tokenizer/tokenizer.h"

namespace spark {
namespace {

std::string nested_arrays(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

TEST(BoundedJson, AcceptsExactlyTheLimitAndRefusesOneMore) {
  EXPECT_FALSE(json_depth_violation(nested_arrays(128)).has_value());
  EXPECT_EQ(parse_json_bounded(nested_arrays(128)).size(), 1u);
  ASSERT_TRUE(json_depth_violation(nested_arrays(129)).has_value());
  EXPECT_EQ(*json_depth_violation(nested_arrays(129)), 128u);  // the byte of the 129th '['
  EXPECT_THROW(parse_json_bounded(nested_arrays(129)), nlohmann::json::parse_error);
  EXPECT_FALSE(json_depth_violation(nested_objects(128)).has_value());
  EXPECT_THROW(parse_json_bounded(nested_objects(129)), nlohmann::json::parse_error);
  EXPECT_THROW(parse_json_bounded(nested_arrays(10), 9), nlohmann::json::parse_error);
  EXPECT_NO_THROW(parse_json_bounded(nested_arrays(9), 9));
}

TEST(BoundedJson, DepthIsNestingNotCount) {
  // Many siblings at depth 2 are fine: only open brackets that are still open count.
  std::string wide = "[";
  for (int i = 0; i < 10000; ++i) wide += std::string(i ? "," : "") + "[1]";
  wide += "]";
  EXPECT_EQ(parse_json_bounded(wide, 2).size(), 10000u);
}

TEST(BoundedJson, BracketsInsideStringsDoNotCount) {
  const std::string text = "{\"a\": \"" + std::string(1000, '[') + "\\\"{{{\\\\\", \"b\": [1]}";
  EXPECT_FALSE(json_depth_violation(text, 2).has_value());
  const auto j = parse_json_bounded(text, 2);
  EXPECT_EQ(j["a"].get<std::string>().size(), 1000u + 5u);
}

TEST(BoundedJson, HundredThousandLevelsAreRefusedWithoutRecursion) {
  const std::string deep = "{\"messages\": " + nested_arrays(100000) + "}";
  try {
    (void)parse_json_bounded<nlohmann::ordered_json>(deep);
    FAIL() << "expected a parse_error";
  } catch (const nlohmann::json::parse_error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(parse_json_bounded_or_discarded<nlohmann::ordered_json>(deep).is_discarded());
}

TEST(BoundedJson, OrDiscardedKeepsParseSemantics) {
  EXPECT_TRUE(parse_json_bounded_or_discarded("{oops").is_discarded());
  EXPECT_EQ(parse_json_bounded_or_discarded<nlohmann::ordered_json>("{\"b\":1,\"a\":2}").begin().key(), "b");
  EXPECT_THROW(parse_json_bounded("{oops"), nlohmann::json::parse_error);
}

TEST(BoundedJson, ConfigJsonTooDeepIsOneErrorNamingTheFile) {
  const std::string text = "{\"model_type\": \"spark2_5\", \"x\": " + nested_arrays(200) + "}";
  try {
    (void)parse_model_config(text, "/models/m/config.json");
    FAIL() << "expected spark::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/models/m/config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nested deeper than 128"), std::string::npos) << msg;
  }
}

TEST(BoundedJson, TokenizerJsonTooDeepIsAnErrorNamingTheOrigin) {
  const std::string text = "{\"model\": " + nested_objects(5000) + "}";
  try {
    (void)Tokenizer::from_json(text, "some/tokenizer.json");
    FAIL() << "expected spark::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("some/tokenizer.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nested deeper"), std::string::npos) << msg;
  }
}

TEST(BoundedJson, SafetensorsHeaderTooDeepIsAnErrorNamingTheFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("spark_bounded_json_deep_" + std::to_string(::getpid()) + ".safetensors");
  const std::string header = "{\"__metadata__\": " + nested_arrays(100000) + "}";
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header;
  }
  try {
    SafetensorsFile f(path);
    FAIL() << "expected spark::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.filename().string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("nested deeper"), std::string::npos) << msg;
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace spark
