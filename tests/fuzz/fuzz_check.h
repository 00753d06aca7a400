// Shared by the libFuzzer harnesses: a failed property check aborts, so libFuzzer records the input as a
// crash. Exceptions a harness does not catch (anything but the documented error types) abort the same way
// through std::terminate.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace spark::fuzz {

[[noreturn]] inline void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz property violated: %s %s\n", what, detail.c_str());
  std::abort();
}

// The Spark-layout tokenizer (synthetic, 2048 entries) the tokenizer harnesses run against, built once.
inline const Tokenizer& spark_tokenizer() {
  static const Tokenizer tok = Tokenizer::from_json(synthetic_tokenizer_json(2048, 1));
  return tok;
}

inline void check(bool ok, const char* what, const std::string& detail = {}) {
  if (!ok) fail(what, detail);
}

// Independent of the project's own UTF-8 checks, so a harness can test them: true when `s` is well-formed
// UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
inline bool well_formed_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80                 ? 1
                 : c >= 0xc2 && c <= 0xdf ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    const auto c1 = static_cast<unsigned char>(len > 1 ? s[i + 1] : 0);
    if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
        (c == 0xf4 && c1 > 0x8f)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace spark::fuzz
