// Drives the output parsers the way the server does, over every way of cutting a text into chunks, so tests
// can check that streaming (many chunks) and non-streaming (one chunk) give the same result.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace spark::test {

// A phone-agent style tool set covering every parameter type the parsers convert.
inline nlohmann::json test_tools() {
  return nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "tap", "description": "Tap an element",
      "parameters": {"type": "object", "properties": {"index": {"type": "integer"}}, "required": ["index"]}}},
    {"type": "function", "function": {"name": "type_text",
      "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "submit": {"type": "boolean"}},
                     "required": ["text"]}}},
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "units": {"enum": ["c", "f"]},
        "lat": {"type": "number"}, "note": {"type": ["string", "null"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "set_alarm",
      "parameters": {"type": "object", "properties": {
        "time": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object", "properties": {"repeat": {"type": "boolean"}}},
        "snooze": {"type": "null"}}}}},
    {"type": "function", "function": {"name": "get_time"}},
    {"type": "function", "function": {"name": "remember", "parameters": {"type": "object",
      "properties": {"content": {}}}}}
  ])");
}

// The whole text; every cut into two chunks; one byte per chunk.
inline std::vector<std::vector<std::string>> chunkings(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  out.push_back({text});
  for (size_t cut = 0; cut <= text.size(); ++cut) out.push_back({text.substr(0, cut), text.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  out.push_back(bytes);
  return out;
}

inline std::string describe(const std::vector<std::string>& chunks) {
  std::string out;
  for (const std::string& c : chunks) out += "[" + c + "]";
  return out;
}

struct ReasoningRun {
  std::string reasoning;
  std::string content;
  bool closed = false;
  std::vector<ParseRecovery> recoveries;
};

inline ReasoningRun run_reasoning(bool thinking, const std::vector<std::string>& chunks) {
  ReasoningParser parser(thinking);
  ReasoningRun run;
  for (const std::string& chunk : chunks) {
    ReasoningDelta d = parser.feed(chunk);
    run.reasoning += d.reasoning;
    run.content += d.content;
  }
  run.closed = parser.reasoning_closed();
  ReasoningDelta d = parser.finish();
  run.reasoning += d.reasoning;
  run.content += d.content;
  run.recoveries = parser.recoveries();
  return run;
}

struct ToolRun {
  ParsedMessage message;
  std::vector<ToolParseDelta> deltas;
  std::vector<ParseRecovery> recoveries;
  bool has_calls = false;
};

inline ToolRun run_tools(const nlohmann::json& tools, bool enabled, const std::vector<std::string>& chunks,
                         uint64_t seed = 7) {
  ToolCallParser parser(tools, enabled, seeded_call_ids(seed));
  ToolRun run;
  for (const std::string& chunk : chunks) run.deltas.push_back(parser.feed(chunk));
  run.deltas.push_back(parser.finish());
  for (const ToolParseDelta& d : run.deltas) run.message.append(d);
  run.recoveries = parser.recoveries();
  run.has_calls = parser.has_calls();
  return run;
}

inline std::vector<std::string> kinds(const std::vector<ParseRecovery>& recoveries) {
  std::vector<std::string> out;
  for (const ParseRecovery& r : recoveries) out.push_back(r.kind);
  return out;
}

struct ExpectedCall {
  std::string name;
  std::string arguments;
};

struct ToolFixture {
  const char* name;
  std::string text;
  std::string content;
  std::vector<ExpectedCall> calls;
  std::vector<std::string> recoveries;  // kinds, in order
  bool enabled = true;
};

// Checks the deltas of one run look like OpenAI streaming tool-call deltas: indexes in order, each call's
// first delta (and only that one) carries an id and a name.
inline void check_delta_shape(const ToolRun& run) {
  size_t next_index = 0;
  for (const ToolParseDelta& delta : run.deltas) {
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (call.index == next_index) {
        EXPECT_FALSE(call.id.empty()) << "first delta of call " << call.index << " has no id";
        EXPECT_FALSE(call.name.empty());
        EXPECT_EQ(call.id.size(), 29u);
        EXPECT_EQ(call.id.rfind("call_", 0), 0u);
        const nlohmann::json j = call.to_openai();
        EXPECT_EQ(j["type"], "function");
        EXPECT_EQ(j["function"]["name"], call.name);
        ++next_index;
      } else {
        EXPECT_EQ(call.index + 1, next_index) << "delta for a call that is not the latest";
        EXPECT_TRUE(call.id.empty());
        EXPECT_TRUE(call.name.empty());
        EXPECT_FALSE(call.to_openai().contains("id"));
      }
      EXPECT_EQ(call.to_openai()["index"], call.index);
    }
  }
}

// Runs a fixture whole, at every two-chunk cut and byte by byte: every run must give the expected message
// and recoveries, and every streamed run must equal the non-streaming one exactly (ids included).
inline void check_tool_fixture(const ToolFixture& f, const nlohmann::json& tools) {
  const ToolRun whole = run_tools(tools, f.enabled, {f.text});
  {
    SCOPED_TRACE(std::string(f.name) + " (whole)");
    EXPECT_EQ(whole.message.content, f.content);
    ASSERT_EQ(whole.message.tool_calls.size(), f.calls.size());
    for (size_t i = 0; i < f.calls.size(); ++i) {
      EXPECT_EQ(whole.message.tool_calls[i].name, f.calls[i].name);
      EXPECT_EQ(whole.message.tool_calls[i].arguments, f.calls[i].arguments);
      // The arguments are a JSON object whose own serialization they are (keys in generation order).
      const auto parsed =
          nlohmann::ordered_json::parse(whole.message.tool_calls[i].arguments, nullptr, false);
      EXPECT_TRUE(parsed.is_object());
      if (parsed.is_object()) {
        EXPECT_EQ(parsed.dump(), whole.message.tool_calls[i].arguments);
      }
    }
    EXPECT_EQ(kinds(whole.recoveries), f.recoveries);
    EXPECT_EQ(whole.has_calls, !f.calls.empty());
  }
  for (const auto& chunks : chunkings(f.text)) {
    SCOPED_TRACE(std::string(f.name) + " " + describe(chunks));
    const ToolRun run = run_tools(tools, f.enabled, chunks);
    EXPECT_EQ(run.message.content, whole.message.content);
    ASSERT_EQ(run.message.tool_calls.size(), whole.message.tool_calls.size());
    for (size_t i = 0; i < run.message.tool_calls.size(); ++i) {
      EXPECT_EQ(run.message.tool_calls[i].id, whole.message.tool_calls[i].id);
      EXPECT_EQ(run.message.tool_calls[i].name, whole.message.tool_calls[i].name);
      EXPECT_EQ(run.message.tool_calls[i].arguments, whole.message.tool_calls[i].arguments);
    }
    EXPECT_EQ(run.recoveries, whole.recoveries);
    EXPECT_EQ(run.has_calls, whole.has_calls);
    check_delta_shape(run);
  }
}

}  // namespace spark::test
