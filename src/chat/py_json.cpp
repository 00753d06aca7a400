#include "chat/py_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/unicode.h"

namespace spark::jinja {

namespace {

// Checked as it grows: one string escapes to up to 6x its size (control characters as \u00XX).
void append_json_string(const std::string& s, bool ensure_ascii, size_t max_bytes, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    check_print_size(out.size(), max_bytes);
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      continue;
    }
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    if (!ensure_ascii) {
      out.append(s, start, i - start);
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      const char32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 | (v >> 10)),
                    static_cast<unsigned>(0xdc00 | (v & 0x3ff)));
      out += buf;
    }
  }
  out += '"';
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o)
      : o_(o),
        item_sep_(o.item_separator ? *o.item_separator : (o.indent ? "," : ", ")),
        key_sep_(o.key_separator ? *o.key_separator : ": ") {}

  void write(const Value& v, int level, std::string& out) const {
    check_print_size(out.size(), o_.max_bytes);  // before each value; after the last in to_python_json
    switch (v.type()) {
      case Value::Type::kNone:
        out += "null";
        return;
      case Value::Type::kBool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Type::kInt:
        out += std::to_string(v.as_int());
        return;
      case Value::Type::kFloat: {
        const double d = v.as_float();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d > 0 ? "Infinity" : "-Infinity";
        } else {
          out += format_float(d);
        }
        return;
      }
      case Value::Type::kString:
        append_json_string(v.as_string(), o_.ensure_ascii, o_.max_bytes, out);
        return;
      case Value::Type::kList: {
        const ListData& l = v.as_list();
        if (l.kind != SeqKind::kList && l.kind != SeqKind::kTuple) break;
        if (l.items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < l.items.size(); ++i) {
          separator(i == 0, level + 1, out);
          write(l.items[i], level + 1, out);
        }
        close(level, out);
        out += ']';
        return;
      }
      case Value::Type::kDict: {
        const DictData& d = v.as_dict();
        if (d.size() == 0) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : d.entries()) entries.push_back(&e);
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          separator(i == 0, level + 1, out);
          append_json_string(entries[i]->first, o_.ensure_ascii, o_.max_bytes, out);
          out += key_sep_;
          write(entries[i]->second, level + 1, out);
        }
        close(level, out);
        out += '}';
        return;
      }
      default:
        break;
    }
    throw RenderError("Object of type " + type_name(v) + " is not JSON serializable");
  }

 private:
  void separator(bool first, int level, std::string& out) const {
    if (!first) out += item_sep_;
    if (o_.indent) newline(level, out);
  }

  void close(int level, std::string& out) const {
    if (o_.indent) newline(level, out);
  }

  void newline(int level, std::string& out) const {
    check_print_size(out.size() + static_cast<size_t>(level) * o_.indent->size(), o_.max_bytes);
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  const JsonOptions& o_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string to_python_json(const Value& value, const JsonOptions& options) {
  std::string out;
  JsonWriter(options).write(value, 0, out);
  check_print_size(out.size(), options.max_bytes);
  return out;
}

}  // namespace spark::jinja
