// Python's arithmetic, comparison and membership operators as jinja2 evaluates them (it compiles template
// expressions to Python), with bounded results: ints are 64-bit (overflow is an error, not a big int) and
// string/list repetition is checked against the output budget.
#pragma once

#include "chat/ast.h"
#include "chat/value.h"

namespace spark::jinja {

class Interpreter;

Value binary_op(BinaryOp op, const Value& a, const Value& b, const Interpreter& interp);
Value negate(const Value& v);
Value unary_plus(const Value& v);
bool compare(CompareOp op, const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);

}  // namespace spark::jinja
