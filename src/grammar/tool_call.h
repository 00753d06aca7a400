// The Spark tool-call syntax as a grammar, around each tool's JSON Schema for its arguments:
// `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`, the arguments in the schema's
// property order (optional ones may be skipped, required ones must come, undeclared ones never do). A
// string-only parameter (the parser takes such a value verbatim) is its bare text; any other value is JSON.
// Values never hold a raw `<` (a JSON string writes it as \u003c), so no value can be mistaken for a tag.
// Every keyword the JSON Schema compiler supports is enforced on the values; one it cannot enforce is a
// spark::Error naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace spark::grammar {

struct ToolSchema {
  ToolSchema(std::string n, nlohmann::ordered_json p, bool s = true)
      : name(std::move(n)), parameters(std::move(p)), schema(s) {}
  std::string name;
  nlohmann::ordered_json parameters;  // the function's `parameters` (null or absent: no arguments)
  // Arguments held to the schema; otherwise only the call's structure is (any keys, values as free text).
  bool schema = true;
};

struct ToolCallGrammarOptions {
  // Free text may come first, and a call only once the text reaches `<tool_call>` (tool_choice "auto");
  // otherwise the output is the call(s) alone (tool_choice "required" or a named function).
  bool free_text = false;
  bool parallel = true;  // one or more calls in a row; false: exactly one (at most one with free_text)
  JsonSchemaOptions json;
};

Grammar tool_call_grammar(const std::vector<ToolSchema>& tools, const ToolCallGrammarOptions& options);

// Whether a parameter's value is written as bare text: its schema allows strings only (as the tool-call
// parser reads it: type "string", or an enum / const / anyOf / oneOf of strings only).
bool tool_parameter_is_text(const nlohmann::ordered_json& schema);

}  // namespace spark::grammar
