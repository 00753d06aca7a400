// UTF-8 and code-point helpers with Python's str semantics: templates index, slice, strip and case-map
// strings by code point, and Python's notion of whitespace (str.isspace, regex \s) includes Unicode spaces
// such as U+3000, which matters for trim_blocks/lstrip_blocks and |trim on CJK text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace spark::jinja {

// True when s is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view s);

// Decodes the code point starting at s[i] and advances i. Input must be valid UTF-8.
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);
size_t code_point_count(std::string_view s);

// Python's str.isspace() set (also what re's \s matches for str patterns).
bool is_py_space(char32_t cp);
// Byte length of the Python-whitespace code point starting at s[i], or 0 if it is not whitespace.
size_t space_length_at(std::string_view s, size_t i);
std::string_view py_rstrip(std::string_view s);
std::string_view py_lstrip(std::string_view s);

// Case mapping and character classes, Unicode-aware through the C.UTF-8 locale's tables (ASCII fallback).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
bool py_islower(std::string_view s);
bool py_isupper(std::string_view s);
char32_t to_upper_cp(char32_t cp);
char32_t to_lower_cp(char32_t cp);
bool is_alpha_cp(char32_t cp);
bool is_digit_cp(char32_t cp);
// Python's str.isprintable() for one code point (drives repr escaping); unassigned code points count as
// printable here, which only changes how a repr of such a string looks.
bool is_printable_cp(char32_t cp);

}  // namespace spark::jinja
