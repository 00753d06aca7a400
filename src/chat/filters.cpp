// jinja2's built-in filters (filters.py) with Hugging Face's tojson override. Generators stand in where
// jinja2 returns one (select, map, unique, items...), so truthiness and exhaustion match.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/operators.h"
#include "chat/py_json.h"
#include "chat/unicode.h"

namespace spark::jinja {

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallValues&);

// Filters jinja2 has that no chat template we know of uses; they fail clearly when they run.
constexpr const char* kUnimplemented[] = {"filesizeformat", "format", "groupby",   "pprint",
                                          "random",         "slice",  "striptags", "truncate",
                                          "urlencode",      "urlize", "wordwrap",  "xmlattr"};

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(py_lower(v.as_string())) : v;
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, with subscript semantics.
std::function<Value(const Value&)> attrgetter(const std::optional<Value>& attribute,
                                              std::optional<Value> fallback, bool lower) {
  std::vector<Value> parts;
  if (attribute && attribute->is_string()) {
    for (const std::string& part : py_split(attribute->as_string(), std::string("."), -1)) {
      const bool digits =
          !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part));
    }
  } else if (attribute && !attribute->is_none()) {
    parts.push_back(*attribute);
  }
  return [parts, fallback, lower](const Value& item) {
    Value v = item;
    for (const Value& part : parts) {
      v = get_item(v, part);
      if (fallback && !fallback->is_none() && v.is_undefined()) v = *fallback;
    }
    return lower ? ignore_case(v) : v;
  };
}

// Python's sorted(): stable, ascending by key with Python's < (TypeError on unorderable keys).
std::vector<Value> sorted_by(std::vector<Value> items, const std::function<Value(const Value&)>& key,
                             bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) keyed.emplace_back(key(item), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? less_than(b.first, a.first, "<") : less_than(a.first, b.first, "<");
  });
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

bool arg_true(const std::optional<Value>& v) {
  return v && truthy(*v);
}

Value f_abs(Interpreter&, const Value& v, CallValues& args) {
  bind_args("abs", args, {});
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN)
      throw RenderError("integer overflow (values beyond 64 bits are not supported)");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  throw RenderError("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("attr", args, {"name"}, 1);
  return get_python_attribute(v, interp.str(*a[0]));
}

Value f_batch(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("batch", args, {"linecount", "fill_with"}, 1);
  if (!a[0]->is_integral()) throw RenderError("batch() linecount must be an integer");
  const int64_t n = a[0]->as_int();
  std::vector<Value> batches;
  std::vector<Value> tmp;
  for (const Value& item : iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n) batches.push_back(Value::list(std::exchange(tmp, {})));
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (a[1] && !a[1]->is_none()) {
      // The padding, before it exists: batch(2000000000, 'x') was 2e9 values.
      if (n > static_cast<int64_t>(tmp.size())) interp.check_items(static_cast<size_t>(n) - tmp.size());
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*a[1]);
    }
    batches.push_back(Value::list(std::move(tmp)));
  }
  return Value::generator(std::move(batches));
}

Value f_capitalize(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("capitalize", args, {});
  return Value::string(py_capitalize(interp.str(v)));
}

Value f_center(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("center", args, {"width"});
  CallValues call;
  call.positional.push_back(a[0] ? *a[0] : Value::integer(80));
  return interp.call_value(get_attribute(Value::string(interp.str(v)), "center"), call);
}

Value f_default(Interpreter&, const Value& v, CallValues& args) {
  auto a = bind_args("default", args, {"default_value", "boolean"});
  if (v.is_undefined() || (arg_true(a[1]) && !truthy(v))) return a[0] ? *a[0] : Value::string("");
  return v;
}

Value f_dictsort(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw RenderError("dictsort requires a mapping, not " + type_name(v));
  const std::string by = a[1] ? interp.str(*a[1]) : "key";
  if (by != "key" && by != "value") throw RenderError("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items;
  for (const auto& [key, value] : v.as_dict().entries()) {
    items.push_back(Value::list({Value::string(key), value}, SeqKind::kTuple));
  }
  const size_t pos = by == "key" ? 0 : 1;
  const bool lower = !arg_true(a[0]);
  return Value::list(sorted_by(
      std::move(items),
      [pos, lower](const Value& item) {
        const Value& x = item.as_list().items[pos];
        return lower ? ignore_case(x) : x;
      },
      arg_true(a[2])));
}

Value f_escape(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("escape", args, {});
  std::string out;
  // An entity grows the text 5x: checked at each one (the plain characters only copy the input).
  auto entity = [&](std::string_view e) { interp.emit(out, e); };
  for (char c : interp.str(v)) {
    switch (c) {
      case '&':
        entity("&amp;");
        break;
      case '<':
        entity("&lt;");
        break;
      case '>':
        entity("&gt;");
        break;
      case '"':
        entity("&#34;");
        break;
      case '\'':
        entity("&#39;");
        break;
      default:
        out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallValues& args) {
  bind_args("first", args, {});
  if (v.is_generator()) {
    GeneratorData& g = v.as_generator();
    if (g.position < g.items.size()) return g.items[g.position++];
  } else {
    std::vector<Value> items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interpreter&, const Value& v, CallValues& args) {
  bind_args("last", args, {});
  if (v.is_generator()) throw RenderError("'generator' object is not reversible");
  std::vector<Value> items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

std::optional<double> parse_py_float(std::string s) {
  std::string t;
  const std::string stripped(py_strip(s, std::nullopt, true, true));
  for (size_t i = 0; i < stripped.size(); ++i) {
    if (stripped[i] == '_' && i > 0 && i + 1 < stripped.size() &&
        std::isdigit(static_cast<unsigned char>(stripped[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(stripped[i + 1]))) {
      continue;
    }
    t += stripped[i];
  }
  if (t.empty()) return std::nullopt;
  std::string lower = py_lower(t);
  const std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity") return lower[0] == '-' ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_py_int(const std::string& s, int base) {
  std::string t = py_strip(s, std::nullopt, true, true);
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t = t.substr(1);
  }
  if (t.size() > 2 && t[0] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(t[1])));
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) t = t.substr(2);
  }
  std::string digits;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() && t[i - 1] != '_') continue;
    digits += t[i];
  }
  if (digits.empty()) return std::nullopt;
  for (char c : digits) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                  : std::isalpha(static_cast<unsigned char>(c))
                      ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                      : 99;
    if (d >= base) return std::nullopt;
  }
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), nullptr, base);
  if (errno == ERANGE) throw RenderError("integer overflow (values beyond 64 bits are not supported)");
  return negative ? -v : v;
}

Value float_to_int(double d) {
  if (std::isinf(d)) throw RenderError("cannot convert float infinity to integer");
  if (std::isnan(d)) throw RenderError("cannot convert float NaN to integer");
  if (std::fabs(d) >= 9.2e18) throw RenderError("integer overflow (values beyond 64 bits are not supported)");
  return Value::integer(static_cast<int64_t>(d));
}

Value f_int(Interpreter&, const Value& v, CallValues& args) {
  auto a = bind_args("int", args, {"default", "base"});
  const Value fallback = a[0] ? *a[0] : Value::integer(0);
  fail_if_undefined(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) return float_to_int(v.as_float());
  if (v.is_string()) {
    const int base = a[1] && a[1]->is_integral() ? static_cast<int>(a[1]->as_int()) : 10;
    if (auto i = parse_py_int(v.as_string(), base)) return Value::integer(*i);
    // jinja2 retries through float() so "42.23"|int gives 42.
    auto d = parse_py_float(v.as_string());
    if (d && std::isfinite(*d)) return float_to_int(*d);
    if (d && std::isinf(*d)) throw RenderError("cannot convert float infinity to integer");
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& v, CallValues& args) {
  auto a = bind_args("float", args, {"default"});
  fail_if_undefined(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    if (auto d = parse_py_float(v.as_string())) return Value::number(*d);
  }
  return a[0] ? *a[0] : Value::number(0.0);
}

Value f_indent(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("indent", args, {"width", "first", "blank"});
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->as_string();
    } else if (a[0]->is_integral()) {
      interp.check_size(static_cast<size_t>(std::max<int64_t>(a[0]->as_int(), 0)));
      indention = std::string(static_cast<size_t>(std::max<int64_t>(a[0]->as_int(), 0)), ' ');
    } else {
      throw RenderError("can't multiply sequence by non-int of type '" + type_name(*a[0]) + "'");
    }
  }
  const std::string s = interp.str(v) + "\n";
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string rv;
  // Checked before each piece: a million empty lines with a 60 KB indent would be 60 GB.
  auto add = [&](std::string_view piece) { interp.emit(rv, piece); };
  if (arg_true(a[1])) add(indention);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      add("\n");
      if (arg_true(a[2]) || !lines[i].empty()) add(indention);
    }
    add(lines[i]);
  }
  return Value::string(std::move(rv));
}

Value f_items(Interpreter&, const Value& v, CallValues& args) {
  bind_args("items", args, {});
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) throw RenderError("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [key, value] : v.as_dict().entries()) {
    items.push_back(Value::list({Value::string(key), value}, SeqKind::kTuple));
  }
  return Value::generator(std::move(items));
}

Value f_join(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("join", args, {"d", "attribute"});
  const std::string sep = a[0] ? interp.str(*a[0]) : "";
  std::vector<Value> items = iterate(v);
  if (a[1] && !a[1]->is_none()) {
    auto get = attrgetter(a[1], std::nullopt, false);
    for (Value& item : items) item = get(item);
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) interp.emit(out, sep);
    append_str(items[i], out, interp.max_output_bytes());
    interp.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_length(Interpreter&, const Value& v, CallValues& args) {
  bind_args("length", args, {});
  return Value::integer(static_cast<int64_t>(length_of(v)));
}

Value f_list(Interpreter&, const Value& v, CallValues& args) {
  bind_args("list", args, {});
  return Value::list(iterate(v));
}

Value f_lower(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("lower", args, {});
  return Value::string(py_lower(interp.str(v)));
}

Value f_upper(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("upper", args, {});
  return Value::string(py_upper(interp.str(v)));
}

Value f_map(Interpreter& interp, const Value& v, CallValues& args) {
  std::function<Value(const Value&)> func;
  if (args.positional.empty() && std::any_of(args.keyword.begin(), args.keyword.end(),
                                             [](const auto& kw) { return kw.first == "attribute"; })) {
    auto a = bind_args("map", args, {"attribute", "default"});
    func = attrgetter(a[0], a[1], false);
  } else {
    if (args.positional.empty()) throw RenderError("map requires a filter argument");
    const std::string name = interp.str(args.positional[0]);
    if (!filter_known(name)) throw RenderError("No filter named '" + name + "'.");
    CallValues rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    func = [&interp, name, rest](const Value& item) {
      CallValues copy = rest;
      return interp.call_filter(name, item, copy);
    };
  }
  std::vector<Value> out;
  if (truthy(v)) {
    for (const Value& item : iterate(v)) out.push_back(func(item));
  }
  return Value::generator(std::move(out));
}

Value select_or_reject(Interpreter& interp, const Value& v, CallValues& args, bool select, bool lookup_attr) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::generator({});
  std::function<Value(const Value&)> transform = [](const Value& x) { return x; };
  size_t off = 0;
  if (lookup_attr) {
    if (args.positional.empty()) throw RenderError("Missing parameter for attribute name");
    transform = attrgetter(args.positional[0], std::nullopt, false);
    off = 1;
  }
  std::optional<std::string> test;
  CallValues test_args;
  if (args.positional.size() > off) {
    test = interp.str(args.positional[off]);
    if (!test_known(*test)) throw RenderError("No test named '" + *test + "'.");
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off) + 1,
                                args.positional.end());
    test_args.keyword = args.keyword;
  }
  for (const Value& item : iterate(v)) {
    const Value x = transform(item);
    bool ok;
    if (test) {
      CallValues copy = test_args;
      ok = interp.call_test(*test, x, copy);
    } else {
      ok = truthy(x);
    }
    if (ok == select) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value f_select(Interpreter& i, const Value& v, CallValues& a) {
  return select_or_reject(i, v, a, true, false);
}
Value f_reject(Interpreter& i, const Value& v, CallValues& a) {
  return select_or_reject(i, v, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& v, CallValues& a) {
  return select_or_reject(i, v, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& v, CallValues& a) {
  return select_or_reject(i, v, a, false, true);
}

Value min_or_max(const Value& v, CallValues& args, bool max, const char* name) {
  auto a = bind_args(name, args, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = attrgetter(a[1], std::nullopt, !arg_true(a[0]));
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    // Python's min/max keep the first of equal items.
    if (max ? less_than(best_key, k, "<") : less_than(k, best_key, "<")) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value f_min(Interpreter&, const Value& v, CallValues& args) {
  return min_or_max(v, args, false, "min");
}
Value f_max(Interpreter&, const Value& v, CallValues& args) {
  return min_or_max(v, args, true, "max");
}

Value f_replace(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("replace", args, {"old", "new", "count"}, 2);
  int64_t count = -1;
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_integral())
      throw RenderError("'" + type_name(*a[2]) + "' object cannot be interpreted as an integer");
    count = a[2]->as_int();
  }
  const std::string s = interp.str(v), old = interp.str(*a[0]), replacement = interp.str(*a[1]);
  return Value::string(py_replace(interp, s, old, replacement, count));
}

Value f_reverse(Interpreter&, const Value& v, CallValues& args) {
  bind_args("reverse", args, {});
  if (v.is_string()) {
    std::u32string u = to_u32(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value::string(to_utf8(u));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() of a generator fails, so jinja2 falls back to a reversed list.
  if (v.is_generator()) return Value::list(std::move(items));
  return Value::generator(std::move(items));
}

// Python's round(x, n) is correctly rounded on the binary value, as glibc's printf is.
double py_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits > 300) return x;
  if (digits < -300) return 0.0 * x;
  if (digits < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
  return std::strtod(buf, nullptr);
}

Value f_round(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("round", args, {"precision", "method"});
  const int64_t precision = a[0] && a[0]->is_integral() ? a[0]->as_int() : 0;
  const std::string method = a[1] ? interp.str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw RenderError("method must be common, ceil or floor");
  }
  fail_if_undefined(v);
  if (!v.is_number()) throw RenderError("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value::integer(v.as_int());
    return Value::number(py_round(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value f_safe(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("safe", args, {});
  return Value::string(interp.str(v));
}

Value f_sort(Interpreter&, const Value& v, CallValues& args) {
  auto a = bind_args("sort", args, {"reverse", "case_sensitive", "attribute"});
  std::vector<std::function<Value(const Value&)>> getters;
  const bool lower = !arg_true(a[1]);
  if (a[2] && a[2]->is_string()) {
    for (const std::string& part : py_split(a[2]->as_string(), std::string(","), -1)) {
      getters.push_back(attrgetter(Value::string(part), std::nullopt, lower));
    }
  } else {
    getters.push_back(attrgetter(a[2], std::nullopt, lower));
  }
  auto key = [getters](const Value& item) {
    std::vector<Value> parts;
    for (const auto& g : getters) parts.push_back(g(item));
    return Value::list(std::move(parts));
  };
  return Value::list(sorted_by(iterate(v), key, arg_true(a[0])));
}

Value f_string(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("string", args, {});
  return Value::string(interp.str(v));
}

Value f_sum(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("sum", args, {"attribute", "start"});
  Value total = a[1] ? *a[1] : Value::integer(0);
  auto get = attrgetter(a[0], std::nullopt, false);
  for (const Value& item : iterate(v)) total = binary_op(BinaryOp::kAdd, total, get(item), interp);
  return total;
}

Value f_title(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("title", args, {});
  // jinja2's title: words start after "-", whitespace, or an opening bracket; the rest is lowercased.
  const std::string s = interp.str(v);
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    const bool boundary = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_py_space(cp);
    if (boundary) {
      append_utf8(out, cp);
      word_start = true;
    } else if (word_start) {
      std::string one;
      append_utf8(one, cp);
      out += py_upper(one);
      word_start = false;
    } else {
      append_utf8(out, to_lower_cp(cp));
    }
  }
  return Value::string(std::move(out));
}

Value f_tojson(Interpreter& interp, const Value& v, CallValues& args) {
  // Hugging Face's override: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  auto a = bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions options;
  options.ensure_ascii = arg_true(a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      options.indent = a[1]->as_string();
    } else if (a[1]->is_integral()) {
      const int64_t n = std::max<int64_t>(a[1]->as_int(), 0);
      interp.check_size(static_cast<size_t>(n));
      options.indent = std::string(static_cast<size_t>(n), ' ');
    } else {
      throw RenderError("indent must be an int or a string");
    }
  }
  if (a[2] && !a[2]->is_none()) {
    std::vector<Value> seps = iterate(*a[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      throw RenderError("separators must be a pair of strings");
    }
    options.item_separator = seps[0].as_string();
    options.key_separator = seps[1].as_string();
  }
  options.sort_keys = arg_true(a[3]);
  options.max_bytes = interp.max_output_bytes();
  return Value::string(to_python_json(v, options));
}

Value f_trim(Interpreter& interp, const Value& v, CallValues& args) {
  auto a = bind_args("trim", args, {"chars"});
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) chars = interp.str(*a[0]);
  return Value::string(py_strip(interp.str(v), chars, true, true));
}

Value f_unique(Interpreter&, const Value& v, CallValues& args) {
  auto a = bind_args("unique", args, {"case_sensitive", "attribute"});
  auto key = attrgetter(a[1], std::nullopt, !arg_true(a[0]));
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    Value k = key(item);
    if (!is_hashable(k)) throw RenderError("unhashable type: '" + type_name(k) + "'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(std::move(k));
      out.push_back(item);
    }
  }
  return Value::generator(std::move(out));
}

Value f_wordcount(Interpreter& interp, const Value& v, CallValues& args) {
  bind_args("wordcount", args, {});
  const std::string s = interp.str(v);
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    const bool word_char = is_alpha_cp(cp) || is_digit_cp(cp) || cp == '_';
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

const std::map<std::string, FilterFn, std::less<>>& filter_table() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

bool filter_known(std::string_view name) {
  return filter_table().count(name) != 0 ||
         std::find(std::begin(kUnimplemented), std::end(kUnimplemented), name) != std::end(kUnimplemented);
}

Value apply_filter(Interpreter& interp, std::string_view name, const Value& input, CallValues& args) {
  const auto& table = filter_table();
  auto it = table.find(name);
  if (it == table.end()) {
    if (filter_known(name))
      throw RenderError("filter '" + std::string(name) + "' is not supported in chat templates");
    throw RenderError("No filter named '" + std::string(name) + "' found.");
  }
  return it->second(interp, input, args);
}

}  // namespace spark::jinja
