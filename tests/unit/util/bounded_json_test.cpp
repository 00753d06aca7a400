#include "util/bounded_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
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

// What nlohmann's own parser makes of `text`, or the error it throws ("type: message").
std::string nlohmann_ordered(const std::string& text) {
  try {
    return nlohmann::ordered_json::parse(text).dump();
  } catch (const nlohmann::json::exception& e) {
    return std::string("error ") + std::to_string(e.id) + ": " + e.what();
  }
}

std::string bounded_ordered(const std::string& text) {
  try {
    return parse_json_bounded<nlohmann::ordered_json>(text).dump();
  } catch (const nlohmann::json::exception& e) {
    return std::string("error ") + std::to_string(e.id) + ": " + e.what();
  }
}

// Random JSON-like text: objects with keys drawn from a few (so repeats are common, in small objects and in
// ones past the builder's hash threshold), arrays, every number form, escapes, and now and then a
// truncation or a stray byte.
std::string random_json(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  switch (depth > 4 ? pick(6) : pick(8)) {
    case 0:
      return "null";
    case 1:
      return pick(2) ? "true" : "false";
    case 2: {
      static const char* numbers[] = {"0",
                                      "-1",
                                      "18446744073709551615",
                                      "-9223372036854775808",
                                      "1.5e3",
                                      "-0.0",
                                      "1e400",
                                      "123456789012345678901234567890",
                                      "2.5E-3"};
      return numbers[pick(9)];
    }
    case 3:
      return pick(2) ? "\"a\\u00e9\\n\"" : "\"\\ud83d\\ude00 x\"";
    case 4:
      return "\"s" + std::to_string(pick(100)) + "\"";
    case 5:
      return "\"\"";
    case 6: {
      std::string a = "[";
      for (int i = 0, n = pick(5); i < n; ++i) a += (i ? "," : "") + random_json(rng, depth + 1);
      return a + "]";
    }
    default: {
      std::string o = "{";
      const int keys = pick(2) ? 4 : 40;
      for (int i = 0, n = pick(2) ? pick(6) : pick(60); i < n; ++i) {
        o += (i ? ", " : " ") + std::string("\"k") + std::to_string(pick(keys)) +
             "\": " + random_json(rng, depth + 1);
      }
      return o + "}";
    }
  }
}

TEST(BoundedJson, OrderedParseIsNlohmannsIncludingRepeatedKeysAndErrors) {
  const std::vector<std::string> fixed = {
      R"({"b": 1, "a": 2, "b": 3})",  // a repeated key keeps its first place and takes its last value
      R"({"x": {"y": [1, {"z": 2, "z": [3]}]}, "x": 0})",
      R"([1, 2, {"a": null}, [], {}])",
      R"({"a": 1,})",
      R"({"a" 1})",
      R"([1e400])",
      R"("\ud800")",
      "",
      "  {\"a\": 1}  x",
  };
  for (const auto& text : fixed) EXPECT_EQ(bounded_ordered(text), nlohmann_ordered(text)) << text;
  std::mt19937 rng(20261206);
  for (int i = 0; i < 3000; ++i) {
    std::string text = random_json(rng, 0);
    if (i % 10 == 9) text.resize(text.size() / 2);  // truncated
    if (i % 10 == 8 && !text.empty()) text[rng() % text.size()] = '}';
    ASSERT_EQ(bounded_ordered(text), nlohmann_ordered(text)) << text;
  }
  EXPECT_TRUE(parse_json_bounded_or_discarded<nlohmann::ordered_json>(R"({"a": 1,})").is_discarded());
  EXPECT_TRUE(parse_json_bounded_or_discarded<nlohmann::ordered_json>("[1e400]").is_discarded());
}

TEST(BoundedJson, OrderedObjectOfManyKeysKeepsOrderAndRepeats) {
  // 200 000 keys: nlohmann's parser scans the members for each key (44 s of a core for this text); the
  // bounded parse appends them. The last key repeats the first: first place, last value.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i)
    text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += ",\"k0\":-1}";
  const auto j = parse_json_bounded<nlohmann::ordered_json>(text);
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j.begin().key(), "k0");
  EXPECT_EQ(j.begin().value(), -1);
  EXPECT_EQ((--j.end()).key(), "k199999");
  EXPECT_EQ(j["k123456"], 123456);
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
