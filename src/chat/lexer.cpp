#include "chat/lexer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/template_error.h"
#include "chat/unicode.h"

namespace spark::jinja {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_name_start(unsigned char c) {
  return std::isalpha(c) || c == '_' || c >= 0x80;
}
bool is_name_char(unsigned char c) {
  return std::isalnum(c) || c == '_' || c >= 0x80;
}

// jinja2 splits the source on \r\n, \r and \n, rejoins with \n and, with keep_trailing_newline off, drops
// one trailing newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') newlines_.push_back(i);
    }
  }

  std::vector<Token> run() {
    bool line_starting = true;  // the previous match ended with a newline (or nothing matched yet)
    while (pos_ < src_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_data(pos_, src_.substr(pos_));
        break;
      }
      const char kind = src_[tag + 1];
      char sign = 0;
      if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) sign = src_[tag + 2];
      emit_data(pos_, strip_data(std::string_view(src_).substr(pos_, tag - pos_), sign, kind != '{',
                                 line_starting));

      size_t raw_body = 0;
      if (kind == '%' && match_raw_begin(tag, &raw_body)) {
        line_starting = src_[raw_body - 1] == '\n';
        line_starting = lex_raw(raw_body, line_starting);
        continue;
      }
      pos_ = tag + 2 + (sign != 0 ? 1 : 0);
      if (kind == '#') {
        line_starting = lex_comment(tag);
      } else {
        line_starting = lex_tag(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin, tag);
      }
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.line = line_at(src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message, size_t at) const {
    throw TemplateError(TemplateError::Kind::kSyntax, message, line_at(at));
  }

  int line_at(size_t pos) const {
    return 1 +
           static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin());
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  size_t skip_spaces(size_t i) const {
    while (i < src_.size()) {
      const size_t len = space_length_at(src_, i);
      if (len == 0) break;
      i += len;
    }
    return i;
  }

  bool starts_with(size_t i, std::string_view s) const { return src_.compare(i, s.size(), s) == 0; }

  // jinja2's whitespace control for the text before a tag: "-" strips all whitespace; otherwise, for block
  // and comment tags not marked "+", lstrip_blocks removes spaces between the line start and the tag.
  std::string_view strip_data(std::string_view text, char sign, bool is_block_or_comment,
                              bool line_starting) const {
    if (sign == '-') return py_rstrip(text);
    if (sign == '+' || !is_block_or_comment) return text;
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting) return text;
    const std::string_view tail = text.substr(line_start);
    if (!tail.empty() && py_lstrip(tail).empty()) return text.substr(0, line_start);
    return text;
  }

  void emit_data(size_t at, std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kData;
    t.value = std::string(text);
    t.line = line_at(at);
    tokens_.push_back(std::move(t));
  }

  void emit(TokenType type, size_t at, std::string value = {}) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = line_at(at);
    tokens_.push_back(std::move(t));
  }

  // Block end: "+%}" keeps what follows, "-%}" eats all following whitespace, "%}" eats one newline
  // (trim_blocks). Returns the position after it, or npos.
  size_t match_block_end(size_t i) const {
    if (starts_with(i, "+%}")) return i + 3;
    if (starts_with(i, "-%}")) return skip_spaces(i + 3);
    if (starts_with(i, "%}")) return (i + 2 < src_.size() && src_[i + 2] == '\n') ? i + 3 : i + 2;
    return std::string::npos;
  }

  bool match_raw_begin(size_t tag, size_t* body) const {
    size_t i = tag + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_spaces(i);
    if (!starts_with(i, "raw")) return false;
    i = skip_spaces(i + 3);
    // Unlike other blocks, jinja2's raw-begin pattern has no trim_blocks newline.
    if (starts_with(i, "-%}")) {
      *body = skip_spaces(i + 3);
      return true;
    }
    if (starts_with(i, "%}")) {
      *body = i + 2;
      return true;
    }
    return false;
  }

  bool lex_raw(size_t body, bool line_starting) {
    for (size_t q = src_.find("{%", body); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t i = q + 2;
      char sign = 0;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
      i = skip_spaces(i);
      if (!starts_with(i, "endraw")) continue;
      const size_t end = match_block_end(skip_spaces(i + 6));
      if (end == std::string::npos) continue;
      emit_data(body, strip_data(std::string_view(src_).substr(body, q - body), sign, true, line_starting));
      pos_ = end;
      return src_[end - 1] == '\n';
    }
    fail("Missing end of raw directive", body);
  }

  bool lex_comment(size_t tag) {
    for (size_t q = pos_; q < src_.size(); ++q) {
      if (starts_with(q, "+#}")) {
        pos_ = q + 3;
        return false;
      }
      if (starts_with(q, "-#}")) {
        pos_ = skip_spaces(q + 3);
        return src_[pos_ - 1] == '\n';
      }
      if (starts_with(q, "#}")) {
        pos_ = q + 2;
        if (pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
        return src_[pos_ - 1] == '\n';
      }
    }
    fail("Missing end of comment tag", tag);
  }

  // Lexes the inside of {{ ... }} or {% ... %}; returns whether the end tag consumed a trailing newline.
  bool lex_tag(TokenType begin, size_t tag) {
    emit(begin, tag);
    const bool is_block = begin == TokenType::kBlockBegin;
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) return false;  // the parser reports the unterminated tag
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (is_block) {
          end = match_block_end(pos_);
        } else if (starts_with(pos_, "-}}")) {
          end = skip_spaces(pos_ + 3);
        } else if (starts_with(pos_, "}}")) {
          end = pos_ + 2;
        }
        if (end != std::string::npos) {
          emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, pos_);
          pos_ = end;
          return src_[end - 1] == '\n';
        }
      }
      const size_t spaces = skip_spaces(pos_);
      if (spaces != pos_) {
        pos_ = spaces;
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  // Digits with optional "_" separators, as jinja2's float and integer patterns allow.
  size_t scan_digits(size_t i) const {
    if (i >= src_.size() || !is_digit(src_[i])) return std::string::npos;
    while (i < src_.size()) {
      if (is_digit(src_[i])) {
        ++i;
      } else if (src_[i] == '_' && i + 1 < src_.size() && is_digit(src_[i + 1])) {
        i += 2;
      } else {
        break;
      }
    }
    return i;
  }

  size_t scan_exponent(size_t i) const {
    if (i >= src_.size() || (src_[i] != 'e' && src_[i] != 'E')) return std::string::npos;
    ++i;
    if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
    return scan_digits(i);
  }

  bool lex_number() {
    const size_t start = pos_;
    if (!is_digit(src_[start])) return false;
    // Float first (jinja2 tries it before integers), never directly after a dot: `x.0.1` is two lookups.
    if (start == 0 || src_[start - 1] != '.') {
      const size_t int_end = scan_digits(start);
      size_t end = std::string::npos;
      if (int_end < src_.size() && src_[int_end] == '.') {
        const size_t frac_end = scan_digits(int_end + 1);
        if (frac_end != std::string::npos) {
          const size_t exp_end = scan_exponent(frac_end);
          end = exp_end != std::string::npos ? exp_end : frac_end;
        }
      }
      if (end == std::string::npos) end = scan_exponent(int_end);
      if (end != std::string::npos) {
        std::string text;
        for (size_t i = start; i < end; ++i) {
          if (src_[i] != '_') text += src_[i];
        }
        Token t;
        t.type = TokenType::kFloat;
        t.float_value = std::strtod(text.c_str(), nullptr);
        t.line = line_at(start);
        tokens_.push_back(std::move(t));
        pos_ = end;
        return true;
      }
    }
    int base = 10;
    size_t digits_start = start;
    if (src_[start] == '0' && start + 1 < src_.size()) {
      const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[start + 1])));
      if (p == 'b' || p == 'o' || p == 'x') {
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        digits_start = start + 2;
      }
    }
    // jinja2's integer pattern: 0b/0o/0x literals, [1-9](_?\d)*, or 0(_?0)* ("012" lexes as 0, then 12).
    auto valid = [&](char c) {
      if (base == 16) return is_hex(c);
      if (base == 10 && src_[start] == '0') return c == '0';
      return is_digit(c) && c - '0' < base;
    };
    size_t end = digits_start;
    std::string digits;
    if (base == 10) {
      digits += src_[start];
      end = start + 1;
    }
    while (end < src_.size()) {
      const bool underscore = src_[end] == '_';
      const size_t at = underscore ? end + 1 : end;
      if (at >= src_.size() || !valid(src_[at])) break;
      digits += src_[at];
      end = at + 1;
    }
    if (digits.empty()) {
      // "0x" without digits: jinja2 lexes the 0 alone.
      base = 10;
      digits.assign(1, '0');
      end = start + 1;
    }
    errno = 0;
    const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
      fail("integer literal too large", start);
    Token t;
    t.type = TokenType::kInteger;
    t.int_value = static_cast<int64_t>(v);
    t.line = line_at(start);
    tokens_.push_back(std::move(t));
    pos_ = end;
    return true;
  }

  bool lex_name() {
    if (!is_name_start(static_cast<unsigned char>(src_[pos_]))) return false;
    size_t end = pos_;
    while (end < src_.size() && is_name_char(static_cast<unsigned char>(src_[end]))) {
      if (static_cast<unsigned char>(src_[end]) >= 0x80 && space_length_at(src_, end) != 0) break;
      ++end;
    }
    emit(TokenType::kName, pos_, src_.substr(pos_, end - pos_));
    pos_ = end;
    return true;
  }

  bool lex_string() {
    const char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) fail("unexpected char " + std::string(1, quote), pos_);
    Token t;
    t.type = TokenType::kString;
    t.value = unescape(std::string_view(src_).substr(pos_ + 1, i - pos_ - 1), pos_);
    t.line = line_at(pos_);
    tokens_.push_back(std::move(t));
    pos_ = i + 1;
    return true;
  }

  // Python's unicode-escape decoding, which jinja2 applies to string literals.
  std::string unescape(std::string_view s, size_t at) const {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 >= s.size()) {
        out += s[i];
        continue;
      }
      const char c = s[++i];
      switch (c) {
        case '\n':
          break;  // line continuation
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          std::string hex(s.substr(i + 1, n));
          if (hex.size() != n || !std::all_of(hex.begin(), hex.end(), is_hex)) {
            fail("truncated \\" + std::string(1, c) + " escape", at);
          }
          const auto cp = static_cast<char32_t>(std::strtoul(hex.c_str(), nullptr, 16));
          if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            fail("unsupported escape \\" + std::string(s.substr(i, n + 1)), at);
          append_utf8(out, cp);
          i += n;
          break;
        }
        default:
          if (c >= '0' && c <= '7') {
            char32_t cp = static_cast<char32_t>(c - '0');
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(s[++i] - '0');
            }
            append_utf8(out, cp);
          } else if (c == 'N') {
            fail("\\N{...} escapes are not supported", at);
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& balance) {
    static const char* const kTwoChar[] = {"**", "//", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (starts_with(pos_, op)) {
        emit(TokenType::kOperator, pos_, op);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t i = pos_;
      std::string ch;
      append_utf8(ch, next_code_point(src_, i));
      fail("unexpected char " + repr_char(ch), pos_);
    }
    if (c == '{') balance.push_back('}');
    if (c == '(') balance.push_back(')');
    if (c == '[') balance.push_back(']');
    if (c == '}' || c == ')' || c == ']') {
      if (balance.empty()) fail(std::string("unexpected '") + c + "'", pos_);
      if (balance.back() != c)
        fail(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", pos_);
      balance.pop_back();
    }
    emit(TokenType::kOperator, pos_, std::string(1, c));
    ++pos_;
  }

  static std::string repr_char(const std::string& ch) { return "'" + ch + "'"; }

  std::string src_;
  std::vector<size_t> newlines_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!valid_utf8(source))
    throw TemplateError(TemplateError::Kind::kSyntax, "template is not valid UTF-8", 1);
  return Lexer(source).run();
}

const char* describe(TokenType type) {
  switch (type) {
    case TokenType::kData:
      return "template data / text";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return "name";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return "operator";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace spark::jinja
