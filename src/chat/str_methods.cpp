// Python str semantics: split/strip/replace/find by code point, with Python's Unicode whitespace.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/methods.h"
#include "chat/unicode.h"

namespace spark::jinja {

namespace {

constexpr const char* kStrAttributes[] = {
    "capitalize", "casefold",     "center",       "count",   "encode",     "endswith",    "expandtabs",
    "find",       "format",       "format_map",   "index",   "isalnum",    "isalpha",     "isascii",
    "isdecimal",  "isdigit",      "isidentifier", "islower", "isnumeric",  "isprintable", "isspace",
    "istitle",    "isupper",      "join",         "ljust",   "lower",      "lstrip",      "maketrans",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",      "rindex",      "rjust",
    "rpartition", "rsplit",       "rstrip",       "split",   "splitlines", "startswith",  "strip",
    "swapcase",   "title",        "translate",    "upper",   "zfill",
};

bool is_line_break(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
         cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

std::optional<std::string> optional_str(const std::optional<Value>& v, const char* method) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw RenderError(std::string(method) + " arg must be None or str");
  return v->as_string();
}

int64_t optional_int(const std::optional<Value>& v, int64_t fallback) {
  if (!v) return fallback;
  if (!v->is_integral())
    throw RenderError("'" + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->as_int();
}

const std::string& str_arg(const std::optional<Value>& v, const char* what) {
  if (!v->is_string()) throw RenderError(std::string(what) + " must be str, not " + type_name(*v));
  return v->as_string();
}

// Byte offset -> code point index, for find/index results.
void no_args(const std::string& fn, const CallValues& args) {
  if (!args.positional.empty() || !args.keyword.empty()) throw RenderError(fn + "() takes no arguments");
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, byte_pos)));
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix, const char* method) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) {
      throw RenderError(std::string(method) + " first arg must be str or a tuple of str, not " +
                        type_name(v));
    }
    const std::string& a = v.as_string();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list() && affix.as_list().kind == SeqKind::kTuple) {
    return std::any_of(affix.as_list().items.begin(), affix.as_list().items.end(), one);
  }
  return one(affix);
}

std::string pad(const std::string& s, int64_t width, char32_t fill, int where) {
  const auto len = static_cast<int64_t>(code_point_count(s));
  if (width <= len) return s;
  const int64_t total = width - len;
  int64_t left = 0;
  if (where == 0) left = total / 2 + (total & width & 1);  // CPython's str.center
  if (where > 0) left = total;
  std::string fill_str;
  append_utf8(fill_str, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill_str;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill_str;
  return out;
}

bool all_cp(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    if (!pred(next_code_point(s, i))) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) throw RenderError("empty separator");
    size_t start = 0;
    while (maxsplit-- > 0) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  // Whitespace split: runs of whitespace separate, ends are dropped; after maxsplit the remainder keeps
  // its trailing whitespace.
  size_t i = 0;
  while (true) {
    while (i < s.size() && space_length_at(s, i) != 0) i += space_length_at(s, i);
    if (i >= s.size()) break;
    if (maxsplit-- <= 0) {
      out.emplace_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < s.size() && space_length_at(s, j) == 0) next_code_point(s, j);
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

namespace {

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, -1);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw RenderError("empty separator");
    size_t end = s.size();
    while (maxsplit-- > 0 && end >= sep->size()) {
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::u32string u = to_u32(s);
  size_t end = u.size();
  while (true) {
    while (end > 0 && is_py_space(u[end - 1])) --end;
    if (end == 0) break;
    if (maxsplit-- <= 0) {
      out.push_back(to_utf8(std::u32string_view(u).substr(0, end)));
      break;
    }
    size_t start = end;
    while (start > 0 && !is_py_space(u[start - 1])) --start;
    out.push_back(to_utf8(std::u32string_view(u).substr(start, end - start)));
    end = start;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0;
  size_t i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const char32_t cp = next_code_point(s, i);
    if (!is_line_break(cp)) continue;
    size_t end_of_break = i;
    if (cp == '\r' && i < s.size() && s[i] == '\n') end_of_break = ++i;
    out.emplace_back(s.substr(start, (keepends ? end_of_break : at) - start));
    start = end_of_break;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  if (!chars) {
    if (left) s = py_lstrip(s);
    if (right) s = py_rstrip(s);
    return std::string(s);
  }
  const std::u32string set = to_u32(*chars);
  std::u32string u = to_u32(s);
  size_t b = 0;
  size_t e = u.size();
  if (left) {
    while (b < e && set.find(u[b]) != std::u32string::npos) ++b;
  }
  if (right) {
    while (e > b && set.find(u[e - 1]) != std::u32string::npos) --e;
  }
  return to_utf8(std::u32string_view(u).substr(b, e - b));
}

std::string py_replace(const Interpreter& interp, std::string_view s, std::string_view old,
                       std::string_view replacement, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  // Each piece is checked before it is added, so the text never grows past the limit.
  auto add = [&](std::string_view piece) { interp.emit(out, piece); };
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    for (size_t i = 0; i <= s.size();) {
      if (count-- > 0) add(replacement);
      if (i == s.size()) break;
      const size_t start = i;
      next_code_point(s, i);
      add(s.substr(start, i - start));
    }
    return out;
  }
  size_t start = 0;
  while (count-- > 0) {
    const size_t hit = s.find(old, start);
    if (hit == std::string_view::npos) break;
    add(s.substr(start, hit - start));
    add(replacement);
    start = hit + old.size();
  }
  add(s.substr(start));
  return out;
}

bool is_str_attribute(std::string_view name) {
  return std::find(std::begin(kStrAttributes), std::end(kStrAttributes), name) != std::end(kStrAttributes);
}

Value call_str_method(Interpreter& interp, const std::string& s, std::string_view name, CallValues& args) {
  const std::string fn = "str." + std::string(name);
  auto strings = [](std::vector<std::string> parts) {
    std::vector<Value> items;
    items.reserve(parts.size());
    for (auto& p : parts) items.push_back(Value::string(std::move(p)));
    return Value::list(std::move(items));
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = bind_args(fn, args, {"chars"});
    return Value::string(py_strip(s, optional_str(a[0], name.data()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto a = bind_args(fn, args, {"sep", "maxsplit"});
    const auto sep = optional_str(a[0], name.data());
    const int64_t maxsplit = optional_int(a[1], -1);
    return strings(name == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    auto a = bind_args(fn, args, {"keepends"});
    return strings(py_splitlines(s, a[0] && truthy(*a[0])));
  }
  if (name == "startswith" || name == "endswith") {
    auto a = bind_args(fn, args, {"prefix"}, 1);
    return Value::boolean(affix_matches(s, *a[0], name == "startswith", name.data()));
  }
  if (name == "replace") {
    auto a = bind_args(fn, args, {"old", "new", "count"}, 2);
    const std::string_view old = str_arg(a[0], "replace() argument 1");
    const std::string_view replacement = str_arg(a[1], "replace() argument 2");
    const int64_t count = optional_int(a[2], -1);
    return Value::string(py_replace(interp, s, old, replacement, count));
  }
  if (name == "upper") {
    no_args(fn, args);
    return Value::string(py_upper(s));
  }
  if (name == "lower" || name == "casefold") {
    no_args(fn, args);
    return Value::string(py_lower(s));
  }
  if (name == "title") {
    no_args(fn, args);
    return Value::string(py_title(s));
  }
  if (name == "capitalize") {
    no_args(fn, args);
    return Value::string(py_capitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto a = bind_args(fn, args, {"sub"}, 1);
    const std::string& sub = str_arg(a[0], "must be str");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t at = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") throw RenderError("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, at));
  }
  if (name == "join") {
    auto a = bind_args(fn, args, {"iterable"}, 1);
    std::string out;
    const std::vector<Value> items = iterate(*a[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        throw RenderError("sequence item " + std::to_string(i) + ": expected str instance, " +
                          type_name(items[i]) + " found");
      }
      if (i > 0) out += s;
      out += items[i].as_string();
      interp.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = bind_args(fn, args, {"affix"}, 1);
    const std::string& affix = str_arg(a[0], (fn + "() argument").c_str());
    if (name == "removeprefix") {
      return Value::string(s.compare(0, affix.size(), affix) == 0 ? s.substr(affix.size()) : s);
    }
    const bool ends =
        affix.size() <= s.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
    return Value::string(ends && !affix.empty() ? s.substr(0, s.size() - affix.size()) : s);
  }
  if (name == "partition" || name == "rpartition") {
    auto a = bind_args(fn, args, {"sep"}, 1);
    const std::string& sep = str_arg(a[0], "must be str");
    if (sep.empty()) throw RenderError("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (at == std::string::npos) {
      parts = name == "partition"
                  ? std::vector<Value>{Value::string(s), Value::string(""), Value::string("")}
                  : std::vector<Value>{Value::string(""), Value::string(""), Value::string(s)};
    } else {
      parts = {Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))};
    }
    return Value::list(std::move(parts), SeqKind::kTuple);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto a = bind_args(fn, args, {"width", "fillchar"}, 1);
    const int64_t width = optional_int(a[0], 0);
    interp.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    char32_t fill = ' ';
    if (a[1]) {
      const std::string& f = str_arg(a[1], "The fill character");
      if (code_point_count(f) != 1)
        throw RenderError("The fill character must be exactly one character long");
      size_t i = 0;
      fill = next_code_point(f, i);
    }
    return Value::string(pad(s, width, fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    auto a = bind_args(fn, args, {"width"}, 1);
    const int64_t width = optional_int(a[0], 0);
    interp.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    const auto len = static_cast<int64_t>(code_point_count(s));
    if (width <= len) return Value::string(s);
    const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    return Value::string((sign ? s.substr(0, 1) : "") + std::string(static_cast<size_t>(width - len), '0') +
                         s.substr(sign ? 1 : 0));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    no_args(fn, args);
    return Value::boolean(all_cp(s, is_digit_cp));
  }

  if (name == "isalpha") {
    no_args(fn, args);
    return Value::boolean(all_cp(s, is_alpha_cp));
  }
  if (name == "isalnum") {
    no_args(fn, args);
    return Value::boolean(all_cp(s, [](char32_t c) { return is_alpha_cp(c) || is_digit_cp(c); }));
  }

  if (name == "isspace") {
    no_args(fn, args);
    return Value::boolean(all_cp(s, is_py_space));
  }
  if (name == "isascii") {
    no_args(fn, args);
    return Value::boolean(
        std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
  }

  if (name == "islower") {
    no_args(fn, args);
    return Value::boolean(py_islower(s));
  }
  if (name == "isupper") {
    no_args(fn, args);
    return Value::boolean(py_isupper(s));
  }
  if (name == "swapcase") {
    no_args(fn, args);
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const char32_t cp = next_code_point(s, i);
      const char32_t up = to_upper_cp(cp);
      append_utf8(out, up != cp ? up : to_lower_cp(cp));
    }
    return Value::string(std::move(out));
  }
  throw RenderError(fn + "() is not supported in chat templates");
}

}  // namespace spark::jinja
