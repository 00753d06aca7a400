// Each cap on what one request may ask for (RequestLimits, set from the server's flags) is a 400 that names
// the parameter, and the value just inside the cap is accepted.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace spark {
namespace {

ordered_json base() {
  return ordered_json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})");
}

// The ApiError a chat request raises, or nullopt-like empty status when it parses.
int chat_status(const ordered_json& body, const RequestLimits& limits, std::string* param = nullptr,
                std::string* message = nullptr) {
  try {
    (void)parse_chat_request(body, limits);
    return 200;
  } catch (const ApiError& e) {
    if (param) *param = e.param();
    if (message) *message = e.what();
    return e.status();
  }
}

// Built key by key: nested braced lists are read differently by GCC and clang (object vs array).
ordered_json tool(const std::string& name, size_t description_bytes = 0) {
  ordered_json parameters = ordered_json::object();
  parameters["type"] = "object";
  parameters["properties"] = ordered_json::object();
  ordered_json function = ordered_json::object();
  function["name"] = name;
  function["description"] = std::string(description_bytes, 'd');
  function["parameters"] = parameters;
  ordered_json t = ordered_json::object();
  t["type"] = "function";
  t["function"] = function;
  return t;
}

TEST(RequestLimits, N) {
  RequestLimits lim;
  lim.max_n = 4;
  ordered_json b = base();
  b["n"] = 4;
  EXPECT_EQ(chat_status(b, lim), 200);
  b["n"] = 5;
  std::string param;
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "n");
}

TEST(RequestLimits, StopStringCount) {
  RequestLimits lim;
  lim.max_stop_strings = 3;
  ordered_json b = base();
  b["stop"] = {"a", "b", "c"};
  EXPECT_EQ(chat_status(b, lim), 200);
  b["stop"].push_back("d");
  std::string param, msg;
  EXPECT_EQ(chat_status(b, lim, &param, &msg), 400);
  EXPECT_EQ(param, "stop");
  EXPECT_NE(msg.find("--max-stop-strings"), std::string::npos) << msg;
}

TEST(RequestLimits, StopStringLength) {
  RequestLimits lim;
  lim.max_stop_string_bytes = 8;
  ordered_json b = base();
  b["stop"] = std::string(8, 'x');
  EXPECT_EQ(chat_status(b, lim), 200);
  b["stop"] = {"ok", std::string(9, 'x')};
  std::string param;
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "stop");
}

TEST(RequestLimits, ToolCount) {
  RequestLimits lim;
  lim.max_tools = 2;
  ordered_json b = base();
  b["tools"] = ordered_json::array({tool("a"), tool("b")});
  EXPECT_EQ(chat_status(b, lim), 200);
  b["tools"].push_back(tool("c"));
  std::string param;
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "tools");
}

TEST(RequestLimits, ToolSchemaSize) {
  RequestLimits lim;
  lim.max_tool_schema_bytes = 1000;
  ordered_json b = base();
  b["tools"] = ordered_json::array({tool("a", 800)});
  EXPECT_EQ(chat_status(b, lim), 200);
  b["tools"] = ordered_json::array({tool("a"), tool("big", 2000)});
  std::string param, msg;
  EXPECT_EQ(chat_status(b, lim, &param, &msg), 400);
  EXPECT_EQ(param, "tools[1].function");
  EXPECT_NE(msg.find("--max-tool-schema-bytes"), std::string::npos) << msg;
}

TEST(RequestLimits, StructuredOutputSize) {
  RequestLimits lim;
  lim.max_structured_output_bytes = 200;
  ordered_json b = base();
  ordered_json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}};
  b["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}};
  EXPECT_EQ(chat_status(b, lim), 200);
  for (int i = 0; i < 20; ++i) schema["properties"]["p" + std::to_string(i)] = {{"type", "integer"}};
  b["response_format"]["json_schema"]["schema"] = schema;
  std::string param, msg;
  EXPECT_EQ(chat_status(b, lim, &param, &msg), 400);
  EXPECT_EQ(param, "response_format.json_schema.schema");
  EXPECT_NE(msg.find("--max-structured-output-bytes"), std::string::npos) << msg;
  // vLLM's forms are held to the same bound: a regex, and a schema given as JSON text.
  b.erase("response_format");
  b["structured_outputs"] = {{"regex", std::string(201, 'a')}};
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "structured_outputs.regex");
  b.erase("structured_outputs");
  b["guided_json"] = schema.dump();
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "guided_json");
}

TEST(RequestLimits, SchemaTextNestedTooDeepIsA400) {
  // A schema as JSON text is parsed bounded: 100 000 nested objects in a string overflowed the stack
  // when the schema was dumped (SIGSEGV from one request).
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "{}" + std::string(100000, '}');
  for (const char* where : {"guided_json", "structured_outputs"}) {
    ordered_json b = base();
    if (std::string(where) == "guided_json")
      b["guided_json"] = deep;
    else
      b["structured_outputs"] = {{"json", deep}};
    std::string param, msg;
    EXPECT_EQ(chat_status(b, RequestLimits{}, &param, &msg), 400) << where;
    EXPECT_NE(msg.find("deeper than 128 levels"), std::string::npos) << msg;
  }
}

TEST(RequestLimits, LogitBiasSizeAndVocabulary) {
  RequestLimits lim;
  lim.max_logit_bias = 2;
  lim.vocab_size = 100;
  ordered_json b = base();
  b["logit_bias"] = {{"0", 1}, {"99", -1}};
  EXPECT_EQ(chat_status(b, lim), 200);
  b["logit_bias"] = {{"1", 1}, {"2", 1}, {"3", 1}};
  std::string param, msg;
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "logit_bias");
  b["logit_bias"] = {{"100", 1}};  // one past the vocabulary, as vLLM refuses
  EXPECT_EQ(chat_status(b, lim, &param, &msg), 400);
  EXPECT_EQ(param, "logit_bias");
  EXPECT_NE(msg.find("100"), std::string::npos) << msg;
  // Without a known vocabulary (vocab_size 0) only the count and the id syntax are checked.
  lim.vocab_size = 0;
  EXPECT_EQ(chat_status(b, lim), 200);
}

TEST(RequestLimits, StopTokenIdsInVocabulary) {
  RequestLimits lim;
  lim.vocab_size = 50;
  ordered_json b = base();
  b["stop_token_ids"] = {0, 49};
  EXPECT_EQ(chat_status(b, lim), 200);
  b["stop_token_ids"] = {50};
  std::string param;
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "stop_token_ids");
}

TEST(RequestLimits, TopLogprobs) {
  RequestLimits lim;
  ordered_json b = base();
  b["logprobs"] = true;
  b["top_logprobs"] = 20;
  EXPECT_EQ(chat_status(b, lim), 200);
  b["top_logprobs"] = 21;
  std::string param;
  EXPECT_EQ(chat_status(b, lim, &param), 400);
  EXPECT_EQ(param, "top_logprobs");
  lim.max_logprobs = 5;
  b["top_logprobs"] = 6;
  EXPECT_EQ(chat_status(b, lim), 400);
  // Legacy completions: logprobs is the count.
  ordered_json c = {{"prompt", "hi"}, {"logprobs", 6}};
  EXPECT_THROW(parse_completion_request(c, lim), ApiError);
  c["logprobs"] = 5;
  EXPECT_EQ(parse_completion_request(c, lim).logprobs, 5);
}

TEST(RequestLimits, ResponseFormatTypes) {
  RequestLimits lim;
  ordered_json b = base();
  for (const char* ok :
       {R"({"type": "text"})", R"({"type": "json_object"})",
        R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})"}) {
    b["response_format"] = ordered_json::parse(ok);
    EXPECT_EQ(chat_status(b, lim), 200) << ok;
  }
  for (const char* bad :
       {R"({"type": "xml"})", R"({"type": 3})", R"("json")", R"({})", R"({"type": "json_schema"})"}) {
    b["response_format"] = ordered_json::parse(bad);
    std::string param;
    EXPECT_EQ(chat_status(b, lim, &param), 400) << bad;
    EXPECT_EQ(param, "response_format") << bad;
  }
  ordered_json c = {{"prompt", "hi"}, {"response_format", {{"type", "grammar"}}}};
  EXPECT_THROW(parse_completion_request(c, lim), ApiError);
}

TEST(RequestBody, DeepNestingIsA400BeforeAnyRecursion) {
  const std::string deep = "{\"messages\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  try {
    (void)parse_request_body(deep);
    FAIL() << "expected ApiError";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.type(), "invalid_request_error");
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_request_body("{\"a\": [[[1]]]}")["a"][0][0][0], 1);
  EXPECT_THROW(parse_request_body("[1]"), ApiError);
  EXPECT_THROW(parse_request_body("{"), ApiError);
}

TEST(RequestBody, DeepToolCallArgumentsAreA400) {
  ordered_json b = base();
  b["messages"].push_back(
      {{"role", "assistant"},
       {"tool_calls",
        {{{"id", "c"},
          {"type", "function"},
          {"function",
           {{"name", "f"},
            {"arguments", "{\"x\": " + std::string(50000, '[') + std::string(50000, ']') + "}"}}}}}}});
  std::string param;
  EXPECT_EQ(chat_status(b, RequestLimits{}, &param), 400);
  EXPECT_EQ(param, "messages[1].tool_calls");
}

}  // namespace
}  // namespace spark
