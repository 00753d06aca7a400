// UTF-8 validation and lossy decoding with the "maximal subpart" rule of Unicode (chapter 3, U+FFFD
// substitution), which is also what Rust's String::from_utf8_lossy does: Hugging Face tokenizers decode
// with it, so our decode and streaming detokenizer replace exactly the bytes theirs replace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spark::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class StepKind { kValid, kInvalid, kIncomplete };

struct Step {
  StepKind kind;
  size_t length;  // bytes consumed: the character, the maximal invalid subpart, or the incomplete tail
};

// Classifies the sequence starting at p[0] (n >= 1 bytes available). kIncomplete means p[0..n) is a
// proper prefix of a well-formed sequence that more bytes could complete.
Step step(const unsigned char* p, size_t n);

// Offset of the first invalid byte, or std::string_view::npos when `s` is well-formed UTF-8.
size_t find_invalid(std::string_view s);

// Appends `bytes` to `out` with every maximal invalid subpart (including a truncated tail) replaced
// by one U+FFFD.
void append_lossy(std::string_view bytes, std::string& out);

// Decodes the code point of a well-formed sequence at p (length from step()).
uint32_t decode(const unsigned char* p, size_t length);

// Appends the UTF-8 encoding of `cp`.
void append(uint32_t cp, std::string& out);

}  // namespace spark::utf8
