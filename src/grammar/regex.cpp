#include "grammar/regex.h"

#include <algorithm>
#include <map>
#include <string>

#include "spark/error.h"

namespace spark::grammar {

namespace {

using CpRanges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr int kMaxGroupNesting = 128;  // as deep as JSON may nest in a request

CpRanges normalize(CpRanges r) {
  std::sort(r.begin(), r.end());
  CpRanges out;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

CpRanges negate(const CpRanges& r) {
  CpRanges n = normalize(r), out;
  uint32_t next = 0;
  for (auto [lo, hi] : n) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return out;
}

const CpRanges& digit_class() {
  static const CpRanges r{{'0', '9'}};
  return r;
}
const CpRanges& word_class() {
  static const CpRanges r{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const CpRanges& space_class() {
  static const CpRanges r{{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680},
                          {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                          {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  return r;
}

class Parser {
 public:
  Parser(GrammarBuilder& b, std::string_view p, const RegexOptions& o) : b_(b), p_(p), o_(o) {}

  ExprId parse_top() {
    // Top-level alternatives carry their own anchors. In search mode the alternatives that share their
    // anchors share one free prefix and suffix (one per alternative would make the determinized automaton
    // track which of them matched: exponential in their number).
    std::vector<ExprId> groups[2][2];
    while (true) {
      bool anchored_start = false, anchored_end = false;
      if (peek('^')) {
        ++i_;
        anchored_start = true;
      }
      ExprId body = parse_sequence(&anchored_end);
      groups[anchored_start][anchored_end].push_back(body);
      if (i_ >= p_.size()) break;
      if (p_[i_] == '|') {
        ++i_;
        continue;
      }
      fail("unbalanced ')'");
    }
    std::vector<ExprId> options;
    for (int start = 0; start < 2; ++start) {
      for (int end = 0; end < 2; ++end) {
        if (groups[start][end].empty()) continue;
        ExprId body = b_.alt(std::move(groups[start][end]));
        if (o_.search) {
          ExprId any = b_.repeat(any_char(true), 0, kUnbounded);
          body = b_.seq({start ? b_.empty() : any, body, end ? b_.empty() : any});
        }
        options.push_back(body);
      }
    }
    return b_.alt(std::move(options));
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    // A pattern may be most of a megabyte: the error names its start and where it failed.
    constexpr size_t kShown = 64;
    size_t cut = std::min(kShown, p_.size());
    while (cut < p_.size() && cut > 0 && (static_cast<unsigned char>(p_[cut]) & 0xC0) == 0x80)
      --cut;  // whole chars
    const std::string shown = p_.size() <= kShown ? std::string(p_) : std::string(p_.substr(0, cut)) + "...";
    throw Error("pattern /" + shown + "/" + (p_.size() > kShown ? " at offset " + std::to_string(i_) : "") +
                ": " + what);
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  // A sequence up to '|' or ')' or the end. `end_anchor`: non-null at top level, where a final '$' is
  // allowed.
  ExprId parse_sequence(bool* end_anchor) {
    std::vector<ExprId> parts;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        const bool last = i_ >= p_.size() || p_[i_] == '|';
        if (!end_anchor || !last) fail("'$' is only supported at the end of the pattern");
        *end_anchor = true;
        break;
      }
      if (p_[i_] == '^') fail("'^' is only supported at the start of the pattern");
      ExprId atom = parse_atom();
      parts.push_back(parse_quantifier(atom));
    }
    return b_.seq(std::move(parts));
  }

  ExprId parse_alternation() {
    std::vector<ExprId> options;
    options.push_back(parse_sequence(nullptr));
    while (peek('|')) {
      ++i_;
      options.push_back(parse_sequence(nullptr));
    }
    return b_.alt(std::move(options));
  }

  int parse_int() {
    size_t start = i_;
    long v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = v * 10 + (p_[i_] - '0');
      if (v > 100000) fail("repetition count too large");
      ++i_;
    }
    return i_ == start ? -1 : static_cast<int>(v);
  }

  ExprId parse_quantifier(ExprId atom) {
    while (i_ < p_.size()) {
      int min = 0, max = 0;
      const char c = p_[i_];
      if (c == '*') {
        min = 0, max = kUnbounded, ++i_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++i_;
      } else if (c == '?') {
        min = 0, max = 1, ++i_;
      } else if (c == '{') {
        const size_t save = i_;
        ++i_;
        min = parse_int();
        if (min < 0) {  // a literal '{' as ECMA-262 Annex B allows
          i_ = save;
          return atom;
        }
        max = min;
        if (peek(',')) {
          ++i_;
          max = parse_int();
          if (max < 0) max = kUnbounded;
        }
        if (!peek('}')) fail("malformed {n,m} repetition");
        ++i_;
        if (max != kUnbounded && max < min) fail("repetition {n,m} with m < n");
      } else {
        break;
      }
      if (peek('?')) ++i_;  // lazy: the same language
      if (peek('+')) fail("possessive quantifiers are not supported");
      atom = b_.repeat(atom, min, max);
      // One quantifier an atom, as ECMA-262 and Python read patterns ("a**" is "nothing to repeat"):
      // each stacked one wrapped the expression once more, and 100 000 of them overflowed the stack of
      // every recursive pass over it.
      if (quantifier_follows()) fail("nothing to repeat: a quantifier follows a quantifier");
    }
    return atom;
  }

  // Whether a quantifier starts at i_ ('{' starts one only as {n}, {n,} or {n,m}).
  bool quantifier_follows() const {
    if (i_ >= p_.size()) return false;
    if (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?') return true;
    if (p_[i_] != '{') return false;
    size_t j = i_ + 1;
    const size_t digits = j;
    while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') ++j;
    return j > digits && j < p_.size() && (p_[j] == '}' || p_[j] == ',');
  }

  ExprId any_char(bool include_newlines) {
    if (include_newlines) return set({{0, kMaxCp}});
    return set(negate({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
  }

  // One expression per distinct class: a class written in a JSON string is hundreds of nodes (each
  // character also as its escapes), and 400 000 '.' built one each held gigabytes before any bound on the
  // automaton could refuse the pattern.
  ExprId set(const CpRanges& r) {
    CpRanges key = normalize(r);
    if (auto it = sets_.find(key); it != sets_.end()) return it->second;
    const ExprId e = codepoint_set(b_, key, o_.json_string);
    sets_.emplace(std::move(key), e);
    return e;
  }

  uint32_t read_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) fail("malformed hex escape");
      const char h = p_[i_++];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  uint32_t read_utf8() {
    const auto c0 = static_cast<unsigned char>(p_[i_]);
    int len = c0 < 0x80 ? 1 : c0 < 0xE0 ? 2 : c0 < 0xF0 ? 3 : 4;
    if (i_ + static_cast<size_t>(len) > p_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c0 : len == 2 ? (c0 & 0x1F) : len == 3 ? (c0 & 0x0F) : (c0 & 0x07);
    for (int k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]) & 0x3F);
    i_ += static_cast<size_t>(len);
    return cp;
  }

  // After a backslash: a class (\d...) into `cls`, or a single code point returned.
  bool parse_escape(CpRanges& cls, uint32_t& cp, bool in_class) {
    if (i_ >= p_.size()) fail("trailing backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'd':
        cls = digit_class();
        return true;
      case 'D':
        cls = negate(digit_class());
        return true;
      case 'w':
        cls = word_class();
        return true;
      case 'W':
        cls = negate(word_class());
        return true;
      case 's':
        cls = space_class();
        return true;
      case 'S':
        cls = negate(space_class());
        return true;
      case 'n':
        cp = '\n';
        return false;
      case 't':
        cp = '\t';
        return false;
      case 'r':
        cp = '\r';
        return false;
      case 'f':
        cp = '\f';
        return false;
      case 'v':
        cp = '\v';
        return false;
      case '0':
        cp = 0;
        return false;
      case 'x':
        cp = read_hex(2);
        return false;
      case 'u':
        if (peek('{')) fail("\\u{...} escapes are not supported");
        cp = read_hex(4);
        return false;
      case 'b':
        if (in_class) {
          cp = '\b';
          return false;
        }
        fail("word boundaries (\\b) are not supported");
      case 'B':
        fail("word boundaries (\\B) are not supported");
      case 'c':
        fail("control escapes (\\c) are not supported");
      case 'p':
      case 'P':
        fail("Unicode property escapes (\\p) are not supported");
      case 'k':
        fail("named backreferences are not supported");
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(c))) fail(std::string("unknown escape \\") + c);
        --i_;
        cp = read_utf8();
        return false;
    }
  }

  ExprId parse_class() {
    bool negated = false;
    if (peek('^')) {
      negated = true;
      ++i_;
    }
    CpRanges ranges;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) fail("unterminated character class");
      if (p_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      if (p_[i_] == ']' && first) {  // ECMA: [] matches nothing, [^] anything
        ++i_;
        break;
      }
      first = false;
      CpRanges cls;
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        if (parse_escape(cls, lo, true)) {
          ranges.insert(ranges.end(), cls.begin(), cls.end());
          continue;
        }
      } else if (p_[i_] == '[' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
        fail("POSIX character classes are not supported");
      } else {
        lo = read_utf8();
      }
      uint32_t hi = lo;
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          if (parse_escape(cls, hi, true)) fail("a class escape cannot end a range");
        } else {
          hi = read_utf8();
        }
        if (hi < lo) fail("character class range out of order");
      }
      ranges.push_back({lo, hi});
    }
    return set(negated ? negate(ranges) : ranges);
  }

  ExprId parse_atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (peek('?')) {
        ++i_;
        if (peek(':')) {
          ++i_;
        } else if (peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (i_ >= p_.size()) fail("unterminated group name");
          ++i_;
        } else {
          fail("lookaround and inline flags are not supported");
        }
      }
      // Bounded: each level is a frame of this parser and of every recursive pass over the expression,
      // and 400 000 nested groups (0.8 MB, within --max-structured-output-bytes) overflowed the stack.
      if (++group_depth_ > kMaxGroupNesting)
        fail("groups nested deeper than " + std::to_string(kMaxGroupNesting) + " levels");
      ExprId inner = parse_alternation();
      if (!peek(')')) fail("missing ')'");
      ++i_;
      --group_depth_;
      return inner;
    }
    if (c == '[') {
      ++i_;
      return parse_class();
    }
    if (c == '.') {
      ++i_;
      return any_char(false);
    }
    if (c == '*' || c == '+' || c == '?') fail(std::string("nothing to repeat before '") + c + "'");
    if (c == '\\') {
      ++i_;
      CpRanges cls;
      uint32_t cp = 0;
      if (parse_escape(cls, cp, false)) return set(cls);
      return set({{cp, cp}});
    }
    const uint32_t cp = read_utf8();
    return set({{cp, cp}});
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexOptions o_;
  size_t i_ = 0;
  int group_depth_ = 0;
  std::map<CpRanges, ExprId> sets_;
};

std::string hex4(uint32_t v, bool upper) {
  static const char* lower_digits = "0123456789abcdef";
  static const char* upper_digits = "0123456789ABCDEF";
  const char* d = upper ? upper_digits : lower_digits;
  std::string s = "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) s.push_back(d[(v >> shift) & 0xF]);
  return s;
}

}  // namespace

ExprId codepoint_set(GrammarBuilder& b, const std::vector<std::pair<uint32_t, uint32_t>>& ranges,
                     bool json_string) {
  std::vector<ExprId> options;
  for (auto [lo, hi] : ranges) {
    if (!json_string) {
      options.push_back(b.codepoints(lo, hi));
      continue;
    }
    // The raw characters JSON allows unescaped, then the escaped forms of the others in the range.
    static constexpr std::pair<uint32_t, uint32_t> kRaw[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCp}};
    for (auto [rlo, rhi] : kRaw) {
      const uint32_t a = std::max(lo, rlo), z = std::min(hi, rhi);
      if (a <= z) options.push_back(b.codepoints(a, z));
    }
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x1F); ++c) {
      const char* short_form = c == '\n'   ? "\\n"
                               : c == '\t' ? "\\t"
                               : c == '\r' ? "\\r"
                               : c == '\b' ? "\\b"
                               : c == '\f' ? "\\f"
                                           : nullptr;
      std::vector<ExprId> forms{b.literal(hex4(c, false))};
      if (hex4(c, true) != hex4(c, false)) forms.push_back(b.literal(hex4(c, true)));
      if (short_form) forms.push_back(b.literal(short_form));
      options.push_back(b.alt(std::move(forms)));
    }
    if (lo <= 0x22 && hi >= 0x22) options.push_back(b.literal("\\\""));
    if (lo <= 0x5C && hi >= 0x5C) options.push_back(b.literal("\\\\"));
    if (lo <= 0x2F && hi >= 0x2F) options.push_back(b.literal("\\/"));
  }
  return b.alt(std::move(options));
}

ExprId compile_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options) {
  return Parser(b, pattern, options).parse_top();
}

}  // namespace spark::grammar
