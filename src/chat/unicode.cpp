#include "chat/unicode.h"

#include <locale.h>
#include <wctype.h>

#include <iterator>

namespace spark::jinja {

namespace {

// glibc (2.35+) builds C.UTF-8 in, so this needs no locale files; without it case mapping is ASCII-only.
locale_t utf8_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

// Assigned code points Python's str.isprintable() rejects (categories Cc, Cf, Cs, Co, Zl, Zp, Zs but space).
constexpr std::pair<char32_t, char32_t> kNonPrintable[] = {
    {0x0, 0x1f},        {0x7f, 0xa0},       {0xad, 0xad},         {0x600, 0x605},     {0x61c, 0x61c},
    {0x6dd, 0x6dd},     {0x70f, 0x70f},     {0x890, 0x891},       {0x8e2, 0x8e2},     {0x1680, 0x1680},
    {0x180e, 0x180e},   {0x2000, 0x200f},   {0x2028, 0x202f},     {0x205f, 0x2064},   {0x2066, 0x206f},
    {0x3000, 0x3000},   {0xd800, 0xf8ff},   {0xfeff, 0xfeff},     {0xfff9, 0xfffb},   {0x110bd, 0x110bd},
    {0x110cd, 0x110cd}, {0x13430, 0x13438}, {0x1bca0, 0x1bca3},   {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
    {0xe0020, 0xe007f}, {0xf0000, 0xffffd}, {0x100000, 0x10fffd},
};

bool is_upper_cp(char32_t cp);
bool is_lower_cp(char32_t cp);

// "Cased" in Python's sense: the character has an upper/lower case form or is itself upper/lower case.
bool is_cased_cp(char32_t cp) {
  return is_upper_cp(cp) || is_lower_cp(cp) || to_upper_cp(cp) != cp || to_lower_cp(cp) != cp;
}

bool is_upper_cp(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  locale_t loc = utf8_locale();
  return loc != nullptr && iswupper_l(cp, loc);
}

bool is_lower_cp(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  locale_t loc = utf8_locale();
  return loc != nullptr && iswlower_l(cp, loc);
}

// Python's upper() uses full case mappings; the one-to-many mapping that realistically shows up is ß.
void append_upper(std::string& out, char32_t cp) {
  if (cp == 0xdf) {
    out += "SS";
    return;
  }
  append_utf8(out, to_upper_cp(cp));
}

}  // namespace

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    char32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
  char32_t cp = len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < len && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out += next_code_point(s, i);
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(out, cp);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool is_py_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

size_t space_length_at(std::string_view s, size_t i) {
  size_t j = i;
  return is_py_space(next_code_point(s, j)) ? j - i : 0;
}

std::string_view py_lstrip(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = space_length_at(s, i);
    if (len == 0) break;
    i += len;
  }
  return s.substr(i);
}

std::string_view py_rstrip(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    if (space_length_at(s, start) == 0) break;
    end = start;
  }
  return s.substr(0, end);
}

char32_t to_upper_cp(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  locale_t loc = utf8_locale();
  return loc == nullptr ? cp : static_cast<char32_t>(towupper_l(static_cast<wint_t>(cp), loc));
}

char32_t to_lower_cp(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  locale_t loc = utf8_locale();
  return loc == nullptr ? cp : static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), loc));
}

bool is_alpha_cp(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  locale_t loc = utf8_locale();
  return loc != nullptr && iswalpha_l(static_cast<wint_t>(cp), loc);
}

bool is_digit_cp(char32_t cp) {
  return cp >= '0' && cp <= '9';
}

bool is_printable_cp(char32_t cp) {
  if (cp >= 0x20 && cp < 0x7f) return true;
  for (const auto& [lo, hi] : kNonPrintable) {
    if (cp < lo) return true;
    if (cp <= hi) return false;
  }
  return true;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_upper(out, next_code_point(s, i));
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_utf8(out, to_lower_cp(next_code_point(s, i)));
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_code_point(s, i);
    if (first) {
      append_upper(out, cp);
      first = false;
    } else {
      append_utf8(out, to_lower_cp(cp));
    }
  }
  return out;
}

// str.title(): a cased character following an uncased one starts a word (so "they're" -> "They'Re").
std::string py_title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_code_point(s, i);
    if (previous_cased) {
      append_utf8(out, to_lower_cp(cp));
    } else {
      append_upper(out, cp);
    }
    previous_cased = is_cased_cp(cp);
  }
  return out;
}

bool py_islower(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_code_point(s, i);
    if (is_upper_cp(cp)) return false;
    if (is_lower_cp(cp)) cased = true;
  }
  return cased;
}

bool py_isupper(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_code_point(s, i);
    if (is_lower_cp(cp)) return false;
    if (is_upper_cp(cp)) cased = true;
  }
  return cased;
}

}  // namespace spark::jinja
