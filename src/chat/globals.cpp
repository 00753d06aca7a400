// The global functions a Hugging Face chat template can call: jinja2's range/dict/namespace plus HF's
// raise_exception and strftime_now.
#include <ctime>

#include "chat/builtins.h"
#include "chat/interpreter.h"

namespace spark::jinja {

namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

class Builtin : public Callable {
 public:
  using Fn = Value (*)(Interpreter&, CallValues&);
  Builtin(const char* name, Fn fn) : name_(name), fn_(fn) {}
  Value call(Interpreter& interp, CallValues& args) const override { return fn_(interp, args); }
  std::string repr() const override { return "<built-in function " + std::string(name_) + ">"; }

 private:
  const char* name_;
  Fn fn_;
};

int64_t int_arg(const Value& v) {
  if (!v.is_integral())
    throw RenderError("'" + type_name(v) + "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value g_range(Interpreter&, CallValues& args) {
  if (!args.keyword.empty()) throw RenderError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    throw RenderError("range expected at most 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0;
  int64_t stop;
  int64_t step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0]);
  } else {
    start = int_arg(p[0]);
    stop = int_arg(p[1]);
    if (p.size() == 3) step = int_arg(p[2]);
  }
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (count > kMaxRange) {
    throw RenderError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i)
    items.push_back(Value::integer(static_cast<int64_t>(start + i * step)));
  return Value::list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) take the same arguments.
DictData dict_from_args(const char* fn, CallValues& args) {
  if (args.positional.size() > 1) {
    throw RenderError(std::string(fn) + " expected at most 1 argument, got " +
                      std::to_string(args.positional.size()));
  }
  DictData d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      for (const Value& pair : iterate(src)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2)
          throw RenderError("dictionary update sequence element has length " + std::to_string(kv.size()) +
                            "; 2 is required");
        if (!kv[0].is_string()) throw RenderError("only string keys are supported in chat template dicts");
        d.set(kv[0].as_string(), kv[1]);
      }
    }
  }
  for (auto& [key, value] : args.keyword) d.set(key, value);
  return d;
}

Value g_dict(Interpreter&, CallValues& args) {
  return Value::dict(dict_from_args("dict", args));
}

Value g_namespace(Interpreter& interp, CallValues& args) {
  auto ns = interp.new_namespace();
  ns->attrs = dict_from_args("namespace", args);
  return Value::namespace_object(std::move(ns));
}

Value g_raise_exception(Interpreter& interp, CallValues& args) {
  auto a = bind_args("raise_exception", args, {"message"}, 1);
  throw RenderError(interp.str(*a[0]), RenderError::Kind::kRaised);
}

Value g_strftime_now(Interpreter&, CallValues& args) {
  auto a = bind_args("strftime_now", args, {"format"}, 1);
  if (!a[0]->is_string()) throw RenderError("strftime() argument 1 must be str, not " + type_name(*a[0]));
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), a[0]->as_string().c_str(), &local);
  return Value::string(std::string(buf, n));
}

}  // namespace

std::vector<std::pair<std::string, Value>> global_functions() {
  static const std::vector<std::pair<std::string, Value>> globals = {
      {"range", Value::callable(std::make_shared<Builtin>("range", g_range))},
      {"dict", Value::callable(std::make_shared<Builtin>("dict", g_dict))},
      {"namespace", Value::callable(std::make_shared<Builtin>("namespace", g_namespace))},
      {"raise_exception", Value::callable(std::make_shared<Builtin>("raise_exception", g_raise_exception))},
      {"strftime_now", Value::callable(std::make_shared<Builtin>("strftime_now", g_strftime_now))},
  };
  return globals;
}

std::vector<std::optional<Value>> bind_args(std::string_view function, const CallValues& args,
                                            std::initializer_list<const char*> params, size_t required) {
  const std::string fn(function);
  std::vector<std::optional<Value>> slots(params.size());
  if (args.positional.size() > params.size()) {
    throw RenderError(fn + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                      std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) slots[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (const char* p : params) {
      if (key == p) break;
      ++i;
    }
    if (i == params.size()) throw RenderError(fn + "() got an unexpected keyword argument '" + key + "'");
    if (slots[i]) throw RenderError(fn + "() got multiple values for argument '" + key + "'");
    slots[i] = value;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!slots[i]) throw RenderError(fn + "() missing required argument '" + *(params.begin() + i) + "'");
  }
  return slots;
}

}  // namespace spark::jinja
