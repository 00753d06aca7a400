#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/unicode.h"

namespace spark::jinja {

namespace {

constexpr int kMaxJsonDepth = 512;

const char* seq_type_name(SeqKind kind) {
  switch (kind) {
    case SeqKind::kList:
      return "list";
    case SeqKind::kTuple:
      return "tuple";
    case SeqKind::kDictItems:
      return "dict_items";
    case SeqKind::kDictKeys:
      return "dict_keys";
    case SeqKind::kDictValues:
      return "dict_values";
  }
  return "list";
}

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
  return a.as_float() == b.as_float();
}

// A new container around values `deepest` levels deep.
void check_nesting(int deepest) {
  if (deepest >= kMaxNesting) {
    throw RenderError(
        "lists, dicts, generators or loops nested more than " + std::to_string(kMaxNesting) + " levels deep",
        RenderError::Kind::kLimit);
  }
}

// 1 + this is the nesting of a new container of `items`; throws beyond kMaxNesting.
int deepest_of(const std::vector<Value>& items) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.nesting());
  check_nesting(deepest);
  return deepest;
}

// Printing walks into namespaces too, which change in place and can hold themselves (`{% set ns.me = ns %}`),
// so kMaxNesting alone does not bound it: the walk counts its own levels.
constexpr int kMaxPrintDepth = 2 * kMaxNesting;

void append_repr_string(std::string_view s, std::string& out, size_t max_bytes);
void append_repr_at(const Value& v, std::string& out, int level, size_t max_bytes);
void append_str_at(const Value& v, std::string& out, int level, size_t max_bytes);

void append_dict_repr(const DictData& d, std::string& out, int level, size_t max_bytes) {
  if (level > kMaxPrintDepth) {
    throw RenderError("value nested more than " + std::to_string(kMaxPrintDepth) +
                          " levels deep to print (a namespace that holds itself?)",
                      RenderError::Kind::kLimit);
  }
  out += '{';
  bool first = true;
  for (const auto& [key, value] : d.entries()) {
    check_print_size(out.size(), max_bytes);
    if (!first) out += ", ";
    first = false;
    append_repr_string(key, out, max_bytes);
    out += ": ";
    append_repr_at(value, out, level + 1, max_bytes);
  }
  out += '}';
}

}  // namespace

const Value* DictData::find(std::string_view key) const {
  return index_.find(entries_, key);
}

void DictData::set(std::string key, Value value) {
  index_.set(entries_, std::move(key), std::move(value));
}

Value Value::undefined(std::string message) {
  auto data = std::make_shared<UndefinedData>();
  data->message = std::move(message);
  return Value(Storage(std::in_place_index<0>, std::move(data)));
}

Value Value::string(std::string s) {
  return Value(Storage(std::in_place_index<5>, std::make_shared<const std::string>(std::move(s))));
}

Value Value::list(std::vector<Value> items, SeqKind kind) {
  const int deepest = deepest_of(items);
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = kind;
  data->depth = deepest + 1;
  return Value(Storage(std::in_place_index<6>, std::shared_ptr<const ListData>(std::move(data))));
}

Value Value::dict(DictData d) {
  int deepest = 0;
  for (const auto& entry : d.entries_) deepest = std::max(deepest, entry.second.nesting());
  check_nesting(deepest);
  d.depth_ = deepest + 1;
  return Value(Storage(std::in_place_index<7>, std::make_shared<const DictData>(std::move(d))));
}

int Value::nesting() const {
  if (is_list()) return as_list().depth;
  if (is_dict()) return as_dict().depth();
  if (is_generator()) return as_generator().depth;
  if (is_loop()) return as_loop().depth;
  return 0;
}

Value Value::namespace_object(std::shared_ptr<NamespaceData> ns) {
  return Value(Storage(std::in_place_index<8>, std::move(ns)));
}

Value Value::callable(std::shared_ptr<const Callable> fn) {
  return Value(Storage(std::in_place_index<9>, std::move(fn)));
}

Value Value::loop(std::shared_ptr<LoopData> loop) {
  loop->depth = deepest_of(loop->items) + 1;
  return Value(Storage(std::in_place_index<10>, std::move(loop)));
}

Value Value::generator(std::vector<Value> items) {
  auto data = std::make_shared<GeneratorData>();
  data->depth = deepest_of(items) + 1;
  data->items = std::move(items);
  return Value(Storage(std::in_place_index<11>, std::move(data)));
}

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) throw RenderError("JSON value nested more than 512 levels deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      // Python would keep the exact big integer; beyond int64 we can only offer the nearest float.
      if (u <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(u));
      return number(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item, depth + 1));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictData d;
      for (const auto& [key, item] : j.items()) d.set(key, from_json(item, depth + 1));
      return dict(std::move(d));
    }
    default:
      throw RenderError("unsupported JSON value");
  }
}

std::string Value::undefined_message() const {
  const auto& data = std::get<0>(storage_);
  return data ? data->message : "None is undefined";
}

const void* Value::identity() const {
  switch (type()) {
    case Type::kNamespace:
      return std::get<8>(storage_).get();
    case Type::kCallable:
      return std::get<9>(storage_).get();
    case Type::kLoop:
      return std::get<10>(storage_).get();
    case Type::kGenerator:
      return std::get<11>(storage_).get();
    case Type::kList:
      return std::get<6>(storage_).get();
    case Type::kDict:
      return std::get<7>(storage_).get();
    case Type::kString:
      return std::get<5>(storage_).get();
    default:
      return nullptr;
  }
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return "Undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return "str";
    case Value::Type::kList:
      return seq_type_name(v.as_list().kind);
    case Value::Type::kDict:
      return "dict";
    case Value::Type::kNamespace:
      return "Namespace";
    case Value::Type::kCallable:
      return v.as_callable().python_type();
    case Value::Type::kLoop:
      return "LoopContext";
    case Value::Type::kGenerator:
      return "generator";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  switch (v.type()) {
    case Value::Type::kNone:
      return "None";
    case Value::Type::kUndefined:
      return "jinja2.runtime.Undefined object";
    case Value::Type::kNamespace:
      return "jinja2.utils.Namespace object";
    case Value::Type::kLoop:
      return "jinja2.runtime.LoopContext object";
    default:
      return type_name(v) + " object";
  }
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return false;
    case Value::Type::kBool:
      return v.as_bool();
    case Value::Type::kInt:
      return v.as_int() != 0;
    case Value::Type::kFloat:
      return v.as_float() != 0.0;
    case Value::Type::kString:
      return !v.as_string().empty();
    case Value::Type::kList:
      return !v.as_list().items.empty();
    case Value::Type::kDict:
      return v.as_dict().size() != 0;
    case Value::Type::kLoop:
      return !v.as_loop().items.empty();
    default:
      return true;
  }
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's repr layout: fixed notation for exponents -4..15.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') {
    out += '-';
    pos = 1;
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e_pos; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp = std::stoi(sci.substr(e_pos + 1));
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(exp) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1);
      out += '.';
      out += digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += exp_buf;
  }
  return out;
}

namespace {

// repr(s) appended to out, checked as it grows: a 60 MB string named in an error message is cut at 1 KiB
// without escaping all of it first.
void append_repr_string(std::string_view s, std::string& out, size_t max_bytes) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  for (size_t i = 0; i < s.size();) {
    check_print_size(out.size(), max_bytes);
    const char32_t cp = next_code_point(s, i);
    char buf[16];
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (is_printable_cp(cp)) {
      append_utf8(out, cp);
    } else {
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    }
  }
  out += quote;
}

void append_repr_at(const Value& v, std::string& out, int level, size_t max_bytes) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      out += "Undefined";
      return;
    case Value::Type::kString:
      append_repr_string(v.as_string(), out, max_bytes);
      return;
    case Value::Type::kList: {
      const ListData& l = v.as_list();
      const char* open = "[";
      const char* close = "]";
      if (l.kind == SeqKind::kTuple) {
        open = "(";
        close = ")";
      } else if (l.kind != SeqKind::kList) {
        out += seq_type_name(l.kind);
        open = "([";
        close = "])";
      }
      out += open;
      for (size_t i = 0; i < l.items.size(); ++i) {
        check_print_size(out.size(), max_bytes);
        if (i > 0) out += ", ";
        append_repr_at(l.items[i], out, level + 1, max_bytes);
      }
      if (l.kind == SeqKind::kTuple && l.items.size() == 1) out += ',';
      out += close;
      return;
    }
    case Value::Type::kDict:
      append_dict_repr(v.as_dict(), out, level, max_bytes);
      return;
    default:
      append_str_at(v, out, level, max_bytes);
      return;
  }
}

void append_str_at(const Value& v, std::string& out, int level, size_t max_bytes) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return;
    case Value::Type::kNone:
      out += "None";
      return;
    case Value::Type::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Type::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Type::kFloat:
      out += format_float(v.as_float());
      return;
    case Value::Type::kString:
      out += v.as_string();
      return;
    case Value::Type::kList:
    case Value::Type::kDict:
      append_repr_at(v, out, level, max_bytes);
      return;
    case Value::Type::kNamespace:
      out += "<Namespace ";
      append_dict_repr(v.as_namespace().attrs, out, level, max_bytes);
      out += '>';
      return;
    case Value::Type::kCallable:
      out += v.as_callable().repr();
      return;
    case Value::Type::kLoop: {
      const LoopData& l = v.as_loop();
      out += "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.items.size()) + ">";
      return;
    }
    case Value::Type::kGenerator:
      out += "<generator object>";
      return;
  }
}

}  // namespace

void throw_print_size(size_t max_bytes) {
  throw RenderError("value too large to print (over " + std::to_string(max_bytes) + " bytes)",
                    RenderError::Kind::kLimit);
}

// The walks check the size before each item; the last item is checked here.
void append_repr(const Value& v, std::string& out, size_t max_bytes) {
  append_repr_at(v, out, 0, max_bytes);
  check_print_size(out.size(), max_bytes);
}

void append_str(const Value& v, std::string& out, size_t max_bytes) {
  append_str_at(v, out, 0, max_bytes);
  check_print_size(out.size(), max_bytes);
}

std::string message_text(std::string_view s) {
  if (s.size() <= kMessageReprBytes) return std::string(s);
  size_t n = kMessageReprBytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a character
  return std::string(s.substr(0, n)) + "...";
}

std::string message_repr(const Value& v) {
  std::string out;
  try {
    append_repr(v, out, kMessageReprBytes);
  } catch (const RenderError& e) {
    if (e.kind() != RenderError::Kind::kLimit) throw;
    return message_text(out + "...");  // over the limit: at least one byte more than kept
  }
  return out;
}

std::string to_str(const Value& v, size_t max_bytes) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_str(v, out, max_bytes);
  return out;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.as_string() == b.as_string();
    case Value::Type::kList: {
      const ListData& x = a.as_list();
      const ListData& y = b.as_list();
      if (x.kind != y.kind || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Type::kDict: {
      const DictData& x = a.as_dict();
      const DictData& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (other == nullptr || !equals(value, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

bool less_than(const Value& a, const Value& b, const char* op) {
  fail_if_undefined(a);
  fail_if_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less_than(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  throw RenderError(std::string("'") + op + "' not supported between instances of '" + type_name(a) +
                    "' and '" + type_name(b) + "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return {};
    case Value::Type::kList:
      return v.as_list().items;
    case Value::Type::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& entry : v.as_dict().entries()) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Type::kString: {
      const std::string& s = v.as_string();
      std::vector<Value> chars;
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        next_code_point(s, i);
        chars.push_back(Value::string(s.substr(start, i - start)));
      }
      return chars;
    }
    case Value::Type::kGenerator: {
      GeneratorData& g = v.as_generator();
      std::vector<Value> rest(g.items.begin() + static_cast<std::ptrdiff_t>(g.position), g.items.end());
      g.position = g.items.size();
      return rest;
    }
    default:
      throw RenderError("'" + type_name(v) + "' object is not iterable");
  }
}

size_t length_of(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return code_point_count(v.as_string());
    case Value::Type::kList:
      return v.as_list().items.size();
    case Value::Type::kDict:
      return v.as_dict().size();
    case Value::Type::kLoop:
      return v.as_loop().items.size();
    default:
      throw RenderError("object of type '" + type_name(v) + "' has no len()");
  }
}

bool is_hashable(const Value& v) {
  if (v.is_dict()) return false;
  if (!v.is_list()) return true;
  const ListData& l = v.as_list();
  if (l.kind != SeqKind::kTuple) return false;
  for (const Value& item : l.items) {
    if (!is_hashable(item)) return false;
  }
  return true;
}

void fail_if_undefined(const Value& v) {
  if (v.is_undefined()) throw RenderError(v.undefined_message());
}

}  // namespace spark::jinja
