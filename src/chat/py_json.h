// Python's json.dumps for template values: what Hugging Face's `tojson` filter produces (ensure_ascii=False,
// ", " / ": " separators, optional indent), byte for byte, including Python's float formatting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "chat/value.h"

namespace spark::jinja {

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // json.dumps(indent=...): spaces or the given string per level
  std::optional<std::string> item_separator;  // default ", " (or "," when indenting)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
  size_t max_bytes = kMaxPrintBytes;  // a huge indent, or a value shared many times, must not exhaust memory
};

// Throws RenderError for values json.dumps rejects (undefined, namespaces, macros, generators).
std::string to_python_json(const Value& value, const JsonOptions& options);

}  // namespace spark::jinja
