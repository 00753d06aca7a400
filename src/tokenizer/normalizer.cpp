#include "tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "spark/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace spark {

namespace {

bool is_ascii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

// Code points of valid UTF-8, one at a time.
template <typename F>
void for_each_code_point(std::string_view s, F&& f) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8::step(p + i, s.size() - i).length;
    f(utf8::decode(p + i, len), i, len);
    i += len;
  }
}

enum class Form { kNfc, kNfd, kNfkc, kNfkd };

// Hugging Face normalizes with the unicode-normalization-alignments crate, whose tables are Unicode 9.0:
// a character assigned later has no decomposition, no composition and combining class 0 there (ICU's
// newer data would decompose U+32FF, or reorder Dogra's nukta and virama). ICU's FilteredNormalizer2
// over the characters of Unicode 9.0 gives exactly that: the parity test checks every code point.
const icu::UnicodeSet& unicode_9_0() {
  static const icu::UnicodeSet* set = [] {
    UErrorCode status = U_ZERO_ERROR;
    auto* s = new icu::UnicodeSet(icu::UnicodeString::fromUTF8("[:age=9.0:]"), status);
    if (U_FAILURE(status)) throw Error(std::string("normalizer: ICU has no Unicode age data (") + u_errorName(status) + ")");
    s->freeze();
    return s;
  }();
  return *set;
}

// Unicode normalization forms through ICU, limited to Unicode 9.0 as above.
class UnicodeFormStep : public NormalizerStep {
 public:
  explicit UnicodeFormStep(Form form) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* full = nullptr;
    switch (form) {
      case Form::kNfc:
        full = icu::Normalizer2::getNFCInstance(status);
        break;
      case Form::kNfd:
        full = icu::Normalizer2::getNFDInstance(status);
        break;
      case Form::kNfkc:
        full = icu::Normalizer2::getNFKCInstance(status);
        break;
      case Form::kNfkd:
        full = icu::Normalizer2::getNFKDInstance(status);
        break;
    }
    if (U_FAILURE(status) || full == nullptr) {
      throw Error(std::string("normalizer: ICU cannot load its normalization data (") + u_errorName(status) + ")");
    }
    normalizer_ = std::make_unique<icu::FilteredNormalizer2>(*full, unicode_9_0());
  }

  void apply(std::string& text, std::string&) const override {
    if (is_ascii(text)) return;  // every form leaves ASCII as it is
    const icu::UnicodeString source = icu::UnicodeString::fromUTF8(text);
    UErrorCode status = U_ZERO_ERROR;
    icu::UnicodeString result;
    normalizer_->normalize(source, result, status);
    if (U_FAILURE(status))
      throw Error(std::string("normalizer: ICU normalization failed (") + u_errorName(status) + ")");
    text.clear();
    result.toUTF8String(text);
  }

 private:
  std::unique_ptr<icu::FilteredNormalizer2> normalizer_;
};

// Lowercase mappings of characters newer than ICU 72's Unicode 15 that Rust's standard library (built
// into tokenizers@0.23.2) knows: measured against it, and checked over every code point by the parity
// test. {uppercase, lowercase}, sorted.
constexpr std::pair<uint32_t, uint32_t> kNewerLowercase[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0x0264}, {0xA7CC, 0xA7CD}, {0xA7CE, 0xA7CF}, {0xA7D2, 0xA7D3},
    {0xA7D4, 0xA7D5}, {0xA7DA, 0xA7DB}, {0xA7DC, 0x019B},
    // Garay U+10D50..10D65 -> U+10D70..10D85, and U+16EA0..16EB8 -> U+16EBB..16ED3: ranges below.
};

uint32_t newer_lowercase(uint32_t cp) {
  if (cp >= 0x10D50 && cp <= 0x10D65) return cp + 0x20;
  if (cp >= 0x16EA0 && cp <= 0x16EB8) return cp + 0x1B;
  for (const auto& [upper, lower] : kNewerLowercase) {
    if (upper == cp) return lower;
  }
  return 0;
}

// Rust's char::to_lowercase applied to every character on its own (as NormalizedString::lowercase
// does): the full, unconditional mapping (U+0130 becomes "i" + U+0307), and no final-sigma rule since
// a lone character has no context. ICU's root-locale full lowercasing of one character gives exactly
// that.
class LowercaseStep : public NormalizerStep {
 public:
  void apply(std::string& text, std::string& scratch) const override {
    if (is_ascii(text)) {
      for (char& c : text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      return;
    }
    scratch.clear();
    scratch.reserve(text.size());
    for_each_code_point(text, [&](uint32_t cp, size_t at, size_t len) {
      if (cp < 0x80) {
        scratch.push_back(cp >= 'A' && cp <= 'Z' ? static_cast<char>(cp - 'A' + 'a') : static_cast<char>(cp));
        return;
      }
      if (const uint32_t lower = newer_lowercase(cp); lower != 0) {
        utf8::append(lower, scratch);
        return;
      }
      UChar src[2];
      int32_t src_len = 0;
      U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(cp));
      UChar dst[16];
      UErrorCode status = U_ZERO_ERROR;
      const int32_t n = u_strToLower(dst, 16, src, src_len, "", &status);
      if (U_FAILURE(status) || n > 16) {
        scratch.append(text, at, len);  // cannot happen: full mappings are at most three characters
        return;
      }
      int32_t i = 0;
      while (i < n) {
        UChar32 c;
        U16_NEXT_UNSAFE(dst, i, c);
        utf8::append(static_cast<uint32_t>(c), scratch);
      }
    });
    text.swap(scratch);
  }
};

class StripStep : public NormalizerStep {
 public:
  StripStep(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text, std::string&) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      bool stop = false;
      for_each_code_point(text, [&](uint32_t cp, size_t at, size_t len) {
        if (stop) return;
        if (is_unicode_white_space(cp)) {
          begin = at + len;
        } else {
          stop = true;
        }
      });
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + start;
        if (!is_unicode_white_space(utf8::decode(p, end - start))) break;
        end = start;
      }
    }
    if (begin != 0 || end != text.size()) text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Every match of the pattern (a literal or a regex) replaced by `content`.
class ReplaceStep : public NormalizerStep {
 public:
  ReplaceStep(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::string& text, std::string& scratch) const override {
    thread_local std::vector<Span> matches;
    matches.clear();
    pattern_.find_all(text, matches);
    if (matches.empty()) return;
    scratch.clear();
    size_t prev = 0;
    for (const Span& m : matches) {
      scratch.append(text, prev, m.begin - prev);
      scratch.append(content_);
      prev = m.end;
    }
    scratch.append(text, prev, std::string::npos);
    text.swap(scratch);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class PrependStep : public NormalizerStep {
 public:
  explicit PrependStep(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text, std::string&) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

std::string type_of(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("normalizer entry must be an object, got " + j.dump());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) throw Error("normalizer entry without a \"type\"");
  return it->get<std::string>();
}

std::string string_field(const nlohmann::json& j, const char* owner, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) {
    throw Error(std::string("normalizer ") + owner + ": \"" + key + "\" must be a string");
  }
  return it->get<std::string>();
}

bool bool_field(const nlohmann::json& j, const char* owner, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw Error(std::string("normalizer ") + owner + ": \"" + key + "\" must be a boolean");
  return it->get<bool>();
}

void add_steps(const nlohmann::json& j, std::vector<std::unique_ptr<NormalizerStep>>& steps, int depth) {
  if (j.is_null()) return;
  const std::string type = type_of(j);
  if (type == "Sequence") {
    if (depth > 16) throw Error("normalizer: Sequence nested too deeply");
    auto list = j.find("normalizers");
    if (list == j.end() || !list->is_array())
      throw Error("normalizer: Sequence without a \"normalizers\" list");
    for (const auto& e : *list) add_steps(e, steps, depth + 1);
  } else if (type == "NFC") {
    steps.push_back(std::make_unique<UnicodeFormStep>(Form::kNfc));
  } else if (type == "NFD") {
    steps.push_back(std::make_unique<UnicodeFormStep>(Form::kNfd));
  } else if (type == "NFKC") {
    steps.push_back(std::make_unique<UnicodeFormStep>(Form::kNfkc));
  } else if (type == "NFKD") {
    steps.push_back(std::make_unique<UnicodeFormStep>(Form::kNfkd));
  } else if (type == "Lowercase") {
    steps.push_back(std::make_unique<LowercaseStep>());
  } else if (type == "Strip") {
    steps.push_back(std::make_unique<StripStep>(bool_field(j, "Strip", "strip_left", true),
                                                bool_field(j, "Strip", "strip_right", true)));
  } else if (type == "Replace") {
    auto pattern = j.find("pattern");
    if (pattern == j.end() || !pattern->is_object()) throw Error("normalizer Replace: no \"pattern\" object");
    std::string content = string_field(j, "Replace", "content");
    if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
      steps.push_back(std::make_unique<ReplaceStep>(Regex(r->get<std::string>()), std::move(content)));
    } else if (auto s = pattern->find("String"); s != pattern->end() && s->is_string()) {
      if (s->get<std::string>().empty()) throw Error("normalizer Replace: empty pattern string");
      steps.push_back(std::make_unique<ReplaceStep>(Regex(s->get<std::string>(), true), std::move(content)));
    } else {
      throw Error("normalizer Replace: pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
  } else if (type == "Prepend") {
    steps.push_back(std::make_unique<PrependStep>(string_field(j, "Prepend", "prepend")));
  } else {
    throw Error("normalizer '" + type +
                "' is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, "
                "Prepend)");
  }
}

}  // namespace

bool is_unicode_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

Normalizer::Normalizer() = default;
Normalizer::~Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;

Normalizer Normalizer::from_json(const nlohmann::json& config) {
  Normalizer n;
  add_steps(config, n.steps_, 0);
  return n;
}

void Normalizer::normalize(std::string_view text, std::string& out) const {
  out.assign(text);
  thread_local std::string scratch;
  for (const auto& step : steps_) step->apply(out, scratch);
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string out;
  normalize(text, out);
  return out;
}

}  // namespace spark
