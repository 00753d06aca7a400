// Methods of Python's built-in types as templates call them (`content.strip()`, `tool.get('x')`,
// `loop.cycle('a', 'b')`). Bound methods are ordinary callable values so `x.strip is defined` and passing
// them around behave as in Python.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/value.h"

namespace spark::jinja {

// True when Python's str type has this attribute (supported or not by call_str_method).
bool is_str_attribute(std::string_view name);
Value call_str_method(Interpreter& interp, const std::string& s, std::string_view name, CallValues& args);

// A bound method value: calling it dispatches on the receiver's type.
Value bound_method(const Value& receiver, std::string name);

}  // namespace spark::jinja
