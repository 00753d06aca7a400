#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "spark/error.h"
#include "tokenizer/unicode_additions.h"

namespace spark {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread scratch: match data for one match (no capture groups are read) and a JIT stack large
// enough for long runs of letters or spaces.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);

  MatchScratch() {
    if (data == nullptr || context == nullptr || stack == nullptr) throw Error("regex: out of memory");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

// Hugging Face compiles its patterns with Oniguruma, and the two engines disagree in places:
//  - Oniguruma's Unicode tables are newer than Debian's PCRE2 (14.0): \p{L}, \p{M}, \p{N}, \p{Nd},
//    \p{P}, \p{S} get the code points assigned since then (a new emoji is \p{S} for the reference);
//  - Oniguruma's \s is exactly White_Space, PCRE2's also takes U+180E;
//  - Oniguruma's \w is Alphabetic | Mark | Decimal_Number | Connector_Punctuation plus Latin-1's
//    superscripts and fractions (measured), PCRE2's is [\p{L}\p{N}_]; \d is Decimal_Number.
// Negated forms inside a character class ([^...] is fine, [\P{L}] is not) cannot be widened and keep
// PCRE2's meaning.
std::string to_pcre2_syntax(std::string_view p, bool widen_classes) {
  auto additions = [&](std::string_view name) {
    return widen_classes ? unicode_class_additions(name) : std::string_view();
  };
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  auto widen = [&](std::string_view body, bool negate) {
    if (in_class) {
      out += body;
    } else {
      out += negate ? "[^" : "[";
      out += body;
      out += "]";
    }
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char next = p[i + 1];
      if (next == 'p' || next == 'P') {
        // \pX or \p{Name}
        size_t end = i + 2;
        std::string_view name;
        if (end < p.size() && p[end] == '{') {
          const size_t close = p.find('}', end);
          if (close == std::string_view::npos) {
            out += p.substr(i);
            break;
          }
          name = p.substr(end + 1, close - end - 1);
          end = close + 1;
        } else if (end < p.size()) {
          name = p.substr(end, 1);
          end += 1;
        }
        const std::string_view escape = p.substr(i, end - i);
        const std::string_view extra = additions(name);
        if (extra.empty() || (next == 'P' && in_class)) {
          out += escape;
        } else {
          widen(std::string("\\p{") + std::string(name) + "}" + std::string(extra), next == 'P');
        }
        i = end - 1;
        continue;
      }
      const std::string digit = "\\p{Nd}" + std::string(additions("Nd"));
      const std::string word = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}" +
                               std::string(additions("L")) + std::string(additions("M")) +
                               std::string(additions("Nd"));
      ++i;
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else if (next == 'd' || (next == 'D' && !in_class)) {
        widen(digit, next == 'D');
      } else if (next == 'w' || (next == 'W' && !in_class)) {
        widen(word, next == 'W');
      } else {
        out.push_back('\\');
        out.push_back(next);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);  // a leading ] is literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const size_t close = p.find(":]", i + 2);  // POSIX class such as [:alpha:]
      if (close != std::string_view::npos) {
        out += p.substr(i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

// A literal string as a pattern: ASCII punctuation escaped, everything else matches itself.
std::string escape_literal(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

Regex::Compiled::Compiled(const std::string& source, const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), PCRE2_UTF | PCRE2_UCP,
                       &error, &offset, nullptr);
  if (code == nullptr) {
    throw Error("regex '" + pattern + "': " + pcre2_message(error) + " at offset " + std::to_string(offset));
  }
  // Without JIT support (some architectures) the interpreter gives the same matches, only slower.
  jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::Compiled::~Compiled() {
  pcre2_code_free(code);
}

Regex::Regex(std::string_view pattern, bool literal) : pattern_(pattern) {
  if (literal) {
    system_ = std::make_unique<Compiled>(escape_literal(pattern), pattern_);
    return;
  }
  const std::string plain = to_pcre2_syntax(pattern, false);
  const std::string widened = to_pcre2_syntax(pattern, true);
  system_ = std::make_unique<Compiled>(plain, pattern_);
  // Classes widened with many ranges compile to much slower matching code, so the widened form is
  // only used for text that needs it.
  if (widened != plain) newer_ = std::make_unique<Compiled>(widened, pattern_);
}

Regex::~Regex() = default;
Regex::Regex(Regex&& other) noexcept = default;
Regex& Regex::operator=(Regex&& other) noexcept = default;

bool Regex::search(std::string_view subject, size_t start, Span& match, UnicodeTables tables) const {
  const Compiled& c = tables == UnicodeTables::kNewer && newer_ ? *newer_ : *system_;
  MatchScratch& s = scratch();
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = PCRE2_ERROR_JIT_STACKLIMIT;
  if (c.jit) rc = pcre2_jit_match(c.code, text, subject.size(), start, 0, s.data, s.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // The interpreter keeps its backtracking frames on the heap, so it copes with any input length.
    rc = pcre2_match(c.code, text, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.data,
                     s.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error("regex '" + pattern_ + "': matching failed: " + pcre2_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  match.begin = static_cast<uint32_t>(ov[0]);
  match.end = static_cast<uint32_t>(ov[1]);
  return true;
}

void Regex::find_all(std::string_view subject, std::vector<Span>& out, UnicodeTables tables) const {
  size_t pos = 0;
  bool have_last = false;
  uint32_t last_end = 0;
  Span m{};
  while (pos <= subject.size() && search(subject, pos, m, tables)) {
    if (m.begin == m.end && have_last && m.begin == last_end) {
      if (pos >= subject.size()) break;
      // Step over one whole character so the next search starts on a character boundary.
      const auto b = static_cast<unsigned char>(subject[pos]);
      pos += b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      continue;
    }
    out.push_back(m);
    pos = m.end;
    have_last = true;
    last_end = m.end;
  }
}

}  // namespace spark
