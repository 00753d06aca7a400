#include "chat/operators.h"

#include <cmath>

#include "chat/interpreter.h"

namespace spark::jinja {

namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  throw RenderError(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) +
                    "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
  throw RenderError("integer overflow (values beyond 64 bits are not supported)");
}

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul_checked(result, base);
    exp >>= 1;
    if (exp > 0) base = mul_checked(base, base);
  }
  return result;
}

// CPython's float_divmod, so -7.5 // 2 and -7.5 % 2 match Python bit for bit.
std::pair<double, double> float_divmod(double vx, double wx) {
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

Value repeat(const Value& seq, int64_t times, const Interpreter& interp) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty()) interp.check_size(s.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out));
  }
  const ListData& l = seq.as_list();
  if (!l.items.empty())
    interp.check_items(l.items.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i) items.insert(items.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(items), l.kind);
}

bool is_sequence(const Value& v) {
  return v.is_list() && (v.as_list().kind == SeqKind::kList || v.as_list().kind == SeqKind::kTuple);
}

}  // namespace

Value binary_op(BinaryOp op, const Value& a, const Value& b, const Interpreter& interp) {
  fail_if_undefined(a);
  fail_if_undefined(b);
  const bool ints = a.is_integral() && b.is_integral();
  const bool numbers = a.is_number() && b.is_number();
  switch (op) {
    case BinaryOp::kAdd: {
      if (ints) return Value::integer(add_checked(a.as_int(), b.as_int()));
      if (numbers) return Value::number(a.as_float() + b.as_float());
      if (a.is_string() && b.is_string()) {
        interp.check_size(a.as_string().size() + b.as_string().size());
        return Value::string(a.as_string() + b.as_string());
      }
      if (is_sequence(a) && is_sequence(b) && a.as_list().kind == b.as_list().kind) {
        interp.check_items(a.as_list().items.size() + b.as_list().items.size());  // before the copy
        std::vector<Value> items = a.as_list().items;
        items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
        return Value::list(std::move(items), a.as_list().kind);
      }
      if (a.is_string() || is_sequence(a)) {
        throw RenderError("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " +
                          type_name(a));
      }
      unsupported(op, a, b);
    }
    case BinaryOp::kSub: {
      if (ints) return Value::integer(sub_checked(a.as_int(), b.as_int()));
      if (numbers) return Value::number(a.as_float() - b.as_float());
      unsupported(op, a, b);
    }
    case BinaryOp::kMul: {
      if (ints) return Value::integer(mul_checked(a.as_int(), b.as_int()));
      if (numbers) return Value::number(a.as_float() * b.as_float());
      if ((a.is_string() || is_sequence(a)) && b.is_integral()) return repeat(a, b.as_int(), interp);
      if ((b.is_string() || is_sequence(b)) && a.is_integral()) return repeat(b, a.as_int(), interp);
      if (a.is_string() || is_sequence(a) || b.is_string() || is_sequence(b)) {
        const Value& other = (a.is_string() || is_sequence(a)) ? b : a;
        throw RenderError("can't multiply sequence by non-int of type '" + type_name(other) + "'");
      }
      unsupported(op, a, b);
    }
    case BinaryOp::kDiv: {
      if (!numbers) unsupported(op, a, b);
      if (b.as_float() == 0) throw RenderError(ints ? "division by zero" : "float division by zero");
      return Value::number(a.as_float() / b.as_float());
    }
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (a.is_string() && op == BinaryOp::kMod) {
        throw RenderError("printf-style string formatting (str % value) is not supported");
      }
      if (!numbers) unsupported(op, a, b);
      if (ints) {
        const int64_t x = a.as_int();
        const int64_t y = b.as_int();
        if (y == 0)
          throw RenderError(op == BinaryOp::kMod ? "integer modulo by zero"
                                                 : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == BinaryOp::kMod) return Value::integer(0);
          overflow();
        }
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::integer(op == BinaryOp::kMod ? m : q);
      }
      if (b.as_float() == 0) {
        throw RenderError(op == BinaryOp::kMod ? "float modulo" : "float floor division by zero");
      }
      auto [q, m] = float_divmod(a.as_float(), b.as_float());
      return Value::number(op == BinaryOp::kMod ? m : q);
    }
    case BinaryOp::kPow: {
      if (!numbers) unsupported(op, a, b);
      if (ints && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
      const double x = a.as_float();
      const double y = b.as_float();
      if (x == 0 && y < 0) throw RenderError("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) throw RenderError("complex results are not supported");
      return Value::number(std::pow(x, y));
    }
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  fail_if_undefined(v);
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::number(-v.as_float());
  throw RenderError("bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  fail_if_undefined(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) return v;
  throw RenderError("bad operand type for unary +: '" + type_name(v) + "'");
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return equals(a, b);
    case CompareOp::kNe:
      return !equals(a, b);
    case CompareOp::kLt:
      return less_than(a, b, "<");
    case CompareOp::kGt:
      return less_than(b, a, ">");
    // Python's <= is its own operator; for every type we order, it is exactly "< or ==".
    case CompareOp::kLe:
      return less_than(a, b, "<=") || equals(a, b);
    case CompareOp::kGe:
      return less_than(b, a, ">=") || equals(a, b);
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string()) {
        throw RenderError("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::kDict:
      if (!is_hashable(item)) throw RenderError("unhashable type: '" + type_name(item) + "'");
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case Value::Type::kList:
      for (const Value& v : container.as_list().items) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Type::kGenerator: {
      // Like Python, membership consumes the generator up to the match.
      GeneratorData& g = container.as_generator();
      while (g.position < g.items.size()) {
        if (equals(g.items[g.position++], item)) return true;
      }
      return false;
    }
    default:
      throw RenderError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace spark::jinja
