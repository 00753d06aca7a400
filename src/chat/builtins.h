// jinja2's built-in filters, tests, global functions and the attribute/item lookup of its sandbox, plus the
// Python str/dict/list methods HF templates call (message.content.strip(), tool.get('x'), d.items()).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace spark::jinja {

// Whether jinja2 has a filter/test of this name; unknown names are syntax errors, as in jinja2. A few known
// filters are not implemented and fail when they run.
bool filter_known(std::string_view name);
bool test_known(std::string_view name);

Value apply_filter(Interpreter& interp, std::string_view name, const Value& input, CallValues& args);
bool apply_test(Interpreter& interp, std::string_view name, const Value& input, CallValues& args);

// `obj.name`: a Python attribute first (methods, namespace and loop attributes), then a dict key.
Value get_attribute(const Value& obj, const std::string& name);
// `obj[key]`: an item first, then (for string keys) an attribute.
Value get_item(const Value& obj, const Value& key);
// `obj[start:stop:step]` with Python's slice rules; null bounds are omitted ones.
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step);
// A Python-only attribute lookup (what |attr does): no dict-key fallback.
Value get_python_attribute(const Value& obj, const std::string& name);

// range, dict, namespace, raise_exception, strftime_now.
std::vector<std::pair<std::string, Value>> global_functions();

// Python's call-binding rules for builtins with named parameters: returns one slot per parameter, empty
// where the caller passed nothing. Throws TypeError-style RenderErrors for extra or unknown arguments.
std::vector<std::optional<Value>> bind_args(std::string_view function, const CallValues& args,
                                            std::initializer_list<const char*> params, size_t required = 0);

// Python's str.split/strip/splitlines family, shared by filters and methods.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// Bounded by the render's output limit as it is built (a kLimit RenderError past it).
std::string py_replace(const Interpreter& interp, std::string_view s, std::string_view old,
                       std::string_view replacement, int64_t count);

}  // namespace spark::jinja
