// GPT-2's byte-level alphabet: every byte is shown as one printable code point (printable bytes as
// themselves, the rest from U+0100 upwards), so byte-level BPE vocabularies are written as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spark::byte_level {

// The code point standing for byte b.
uint32_t byte_to_code_point(uint8_t b);

// The byte a code point stands for, or -1 when the code point is not in the alphabet.
int code_point_to_byte(uint32_t cp);

// The byte-level text of raw bytes (what a tokenizer.json vocabulary entry looks like).
std::string encode(std::string_view bytes);

// Raw bytes of a byte-level vocabulary entry; false (and `out` unspecified) when the text holds a
// character outside the alphabet or is not valid UTF-8.
bool decode(std::string_view text, std::string& out);

}  // namespace spark::byte_level
