// jinja2's built-in tests (`x is defined`, `x is string`, `x is in y`...), from its tests.py.
#include <algorithm>
#include <map>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/operators.h"
#include "chat/unicode.h"

namespace spark::jinja {

namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallValues&);

// Tests without parameters still receive whatever the template passes (`x is defined not in y` passes the
// name `not`), and Python rejects the extra argument.
void no_args(const char* name, const CallValues& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    throw RenderError(std::string("test_") + name + "() takes 1 positional argument but " +
                      std::to_string(1 + args.positional.size() + args.keyword.size()) + " were given");
  }
}

const Value& one_arg(const char* name, CallValues& args) {
  auto a = bind_args(name, args, {"other"}, 1);
  args.positional = {*a[0]};
  return args.positional[0];
}

bool t_odd(Interpreter& i, const Value& v, CallValues& args) {
  no_args("odd", args);
  return equals(binary_op(BinaryOp::kMod, v, Value::integer(2), i), Value::integer(1));
}

bool t_even(Interpreter& i, const Value& v, CallValues& args) {
  no_args("even", args);
  return equals(binary_op(BinaryOp::kMod, v, Value::integer(2), i), Value::integer(0));
}

bool t_divisibleby(Interpreter& i, const Value& v, CallValues& args) {
  const Value& num = one_arg("divisibleby", args);
  return equals(binary_op(BinaryOp::kMod, v, num, i), Value::integer(0));
}

bool t_defined(Interpreter&, const Value& v, CallValues& args) {
  no_args("defined", args);
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallValues& args) {
  no_args("undefined", args);
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallValues& args) {
  no_args("none", args);
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, CallValues& args) {
  no_args("boolean", args);
  return v.is_bool();
}
bool t_false(Interpreter&, const Value& v, CallValues& args) {
  no_args("false", args);
  return v.is_bool() && !v.as_bool();
}
bool t_true(Interpreter&, const Value& v, CallValues& args) {
  no_args("true", args);
  return v.is_bool() && v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, CallValues& args) {
  no_args("integer", args);
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, CallValues& args) {
  no_args("float", args);
  return v.is_float();
}
bool t_lower(Interpreter& interp, const Value& v, CallValues& args) {
  no_args("lower", args);
  return py_islower(interp.str(v));
}
bool t_upper(Interpreter& interp, const Value& v, CallValues& args) {
  no_args("upper", args);
  return py_isupper(interp.str(v));
}
bool t_string(Interpreter&, const Value& v, CallValues& args) {
  no_args("string", args);
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, CallValues& args) {
  no_args("mapping", args);
  return v.is_dict();
}
bool t_number(Interpreter&, const Value& v, CallValues& args) {
  no_args("number", args);
  return v.is_number();
}

// Python: len() works and there is __getitem__ (so str, list, tuple, dict, and jinja2's Undefined).
bool t_sequence(Interpreter&, const Value& v, CallValues& args) {
  no_args("sequence", args);
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kString:
    case Value::Type::kDict:
      return true;
    case Value::Type::kList:
      return v.as_list().kind == SeqKind::kList || v.as_list().kind == SeqKind::kTuple;
    default:
      return false;
  }
}

bool t_iterable(Interpreter&, const Value& v, CallValues& args) {
  no_args("iterable", args);
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kString:
    case Value::Type::kList:
    case Value::Type::kDict:
    case Value::Type::kLoop:
    case Value::Type::kGenerator:
      return true;
    default:
      return false;
  }
}

// Undefined and the loop object define __call__ in jinja2, so Python's callable() accepts them.
bool t_callable(Interpreter&, const Value& v, CallValues& args) {
  no_args("callable", args);
  return v.is_callable() || v.is_undefined() || v.is_loop();
}

// Python's `is`: singletons and small cached ints compare by value, objects by identity.
bool t_sameas(Interpreter&, const Value& v, CallValues& args) {
  const Value& other = one_arg("sameas", args);
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case Value::Type::kNone:
      return true;
    case Value::Type::kBool:
      return v.as_bool() == other.as_bool();
    case Value::Type::kInt:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Type::kUndefined:
    case Value::Type::kFloat:
      return false;
    default:
      return v.identity() == other.identity();
  }
}

bool t_escaped(Interpreter&, const Value&, CallValues& args) {
  no_args("escaped", args);
  return false;
}

bool t_in(Interpreter&, const Value& v, CallValues& args) {
  return contains(one_arg("in", args), v);
}

bool t_eq(Interpreter&, const Value& v, CallValues& args) {
  return compare(CompareOp::kEq, v, one_arg("eq", args));
}
bool t_ne(Interpreter&, const Value& v, CallValues& args) {
  return compare(CompareOp::kNe, v, one_arg("ne", args));
}
bool t_lt(Interpreter&, const Value& v, CallValues& args) {
  return compare(CompareOp::kLt, v, one_arg("lt", args));
}
bool t_le(Interpreter&, const Value& v, CallValues& args) {
  return compare(CompareOp::kLe, v, one_arg("le", args));
}
bool t_gt(Interpreter&, const Value& v, CallValues& args) {
  return compare(CompareOp::kGt, v, one_arg("gt", args));
}
bool t_ge(Interpreter&, const Value& v, CallValues& args) {
  return compare(CompareOp::kGe, v, one_arg("ge", args));
}

bool t_filter(Interpreter&, const Value& v, CallValues& args) {
  no_args("filter", args);
  return v.is_string() && filter_known(v.as_string());
}
bool t_test(Interpreter&, const Value& v, CallValues& args) {
  no_args("test", args);
  return v.is_string() && test_known(v.as_string());
}

const std::map<std::string, TestFn, std::less<>>& test_table() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"filter", t_filter},
      {"test", t_test},
      {"none", t_none},
      {"boolean", t_boolean},
      {"false", t_false},
      {"true", t_true},
      {"integer", t_integer},
      {"float", t_float},
      {"lower", t_lower},
      {"upper", t_upper},
      {"string", t_string},
      {"mapping", t_mapping},
      {"number", t_number},
      {"sequence", t_sequence},
      {"iterable", t_iterable},
      {"callable", t_callable},
      {"sameas", t_sameas},
      {"escaped", t_escaped},
      {"in", t_in},
      {"==", t_eq},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"!=", t_ne},
      {"ne", t_ne},
      {">", t_gt},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">=", t_ge},
      {"ge", t_ge},
      {"<", t_lt},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<=", t_le},
      {"le", t_le},
  };
  return table;
}

}  // namespace

bool test_known(std::string_view name) {
  return test_table().count(name) != 0;
}

bool apply_test(Interpreter& interp, std::string_view name, const Value& input, CallValues& args) {
  const auto& table = test_table();
  auto it = table.find(name);
  if (it == table.end()) throw RenderError("No test named '" + std::string(name) + "' found.");
  return it->second(interp, input, args);
}

}  // namespace spark::jinja
