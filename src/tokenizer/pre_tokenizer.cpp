#include "tokenizer/pre_tokenizer.h"

#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "spark/error.h"

namespace spark {

namespace {

struct Chunk {
  uint32_t begin;
  uint32_t end;
  bool flag;  // before the behavior: "is a match"; after it: "remove"
};

// The pieces of `piece` as matches and the gaps between them, in order (Hugging Face's
// Pattern::find_matches), then folded by the delimiter behavior (NormalizedString::split).
void apply_behavior(std::string_view piece, const std::vector<Span>& matches, SplitBehavior behavior,
                    bool invert, std::vector<std::string_view>& out) {
  thread_local std::vector<Chunk> chunks, splits;  // per call they would be two allocations per piece
  chunks.clear();
  splits.clear();
  uint32_t prev = 0;
  for (const Span& m : matches) {
    if (prev != m.begin) chunks.push_back({prev, m.begin, invert});
    chunks.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  const auto n = static_cast<uint32_t>(piece.size());
  if (prev != n) chunks.push_back({prev, n, invert});

  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Chunk& c : chunks) splits.push_back({c.begin, c.end, false});
      break;
    case SplitBehavior::kRemoved:
      splits = chunks;
      break;
    case SplitBehavior::kContiguous:
      for (const Chunk& c : chunks) {
        if (c.flag == previous_match && !splits.empty()) {
          splits.back().end = c.end;
        } else {
          splits.push_back({c.begin, c.end, false});
        }
        previous_match = c.flag;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Chunk& c : chunks) {
        if (c.flag && !previous_match && !splits.empty()) {
          splits.back().end = c.end;
        } else {
          splits.push_back({c.begin, c.end, false});
        }
        previous_match = c.flag;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
        if (it->flag && !previous_match && !splits.empty()) {
          splits.back().begin = it->begin;
        } else {
          splits.push_back({it->begin, it->end, false});
        }
        previous_match = it->flag;
      }
      std::reverse(splits.begin(), splits.end());
      break;
  }
  for (const Chunk& s : splits) {
    if (!s.flag && s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
  }
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

SplitBehavior parse_behavior(const nlohmann::json& j) {
  const std::string b = j.is_string() ? j.get<std::string>() : std::string();
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  throw Error("pre_tokenizer Split has unsupported behavior " + j.dump());
}

bool bool_field(const nlohmann::json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(std::string("pre_tokenizer field '") + key + "' must be a boolean");
  return it->get<bool>();
}

std::string type_of(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("pre_tokenizer entry must be an object, got " + j.dump());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) throw Error("pre_tokenizer entry without a \"type\"");
  return it->get<std::string>();
}

// Hugging Face's is_punc: ASCII punctuation (which takes in $+<=>^`|~) or a character of a P* category
// in the unicode_categories crate, whose tables are Unicode 8.0 (U+166D and U+111C9 were punctuation
// then), each character its own match. Measured over every code point by the parity test.
std::string punctuation_class() {
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeSet set(icu::UnicodeString::fromUTF8("[[:P:]&[:age=8.0:]]"), status);
  if (U_FAILURE(status))
    throw Error(std::string("pre_tokenizer: ICU has no Unicode data (") + u_errorName(status) + ")");
  set.add(0x21, 0x2F).add(0x3A, 0x40).add(0x5B, 0x60).add(0x7B, 0x7E).add(0x166D).add(0x111C9);
  std::string out = "[";
  char buf[32];
  for (int32_t i = 0; i < set.getRangeCount(); ++i) {
    std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", static_cast<unsigned>(set.getRangeStart(i)),
                  static_cast<unsigned>(set.getRangeEnd(i)));
    out += buf;
  }
  return out + "]";
}

std::unique_ptr<PreTokenizerStep> make_step(const nlohmann::json& j) {
  const std::string type = type_of(j);
  if (type == "Split") {
    const auto pattern = j.find("pattern");
    if (pattern == j.end() || !pattern->is_object()) throw Error("pre_tokenizer: Split has no pattern");
    const bool invert = bool_field(j, "invert", false);
    const SplitBehavior behavior = parse_behavior(j.value("behavior", nlohmann::json()));
    if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
      return std::make_unique<SplitStep>(Regex(r->get<std::string>()), behavior, invert);
    }
    if (auto s = pattern->find("String"); s != pattern->end() && s->is_string()) {
      if (s->get<std::string>().empty()) throw Error("pre_tokenizer: Split on an empty string");
      return std::make_unique<SplitStep>(Regex(s->get<std::string>(), true), behavior, invert);
    }
    throw Error("pre_tokenizer: Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
  }
  if (type == "Digits") return std::make_unique<DigitsStep>(bool_field(j, "individual_digits", false));
  if (type == "Punctuation") {
    const auto b = j.find("behavior");
    const SplitBehavior behavior =
        b == j.end() || b->is_null() ? SplitBehavior::kIsolated : parse_behavior(*b);
    return std::make_unique<SplitStep>(Regex(punctuation_class()), behavior, false);
  }
  if (type == "Whitespace") {
    // Keeps the matches of \w+|[^\w\s]+ and drops everything else (the whitespace). Hugging Face
    // compiles it with Rust's regex crate, whose \w lacks the Latin-1 superscripts and fractions that
    // Oniguruma's (and so our translated) \w has, and takes in the joiners U+200C and U+200D.
    return std::make_unique<SplitStep>(
        Regex(
            R"((?:(?![\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}])\w|[\x{200C}\x{200D}])+|(?:[\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}]|[^\w\s\x{200C}\x{200D}])+)"),
        SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") {
    // Splits on char::is_whitespace (White_Space), dropping it.
    return std::make_unique<SplitStep>(
        Regex(R"([\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]+)"),
        SplitBehavior::kRemoved, false);
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelStep>(bool_field(j, "add_prefix_space", true),
                                           bool_field(j, "use_regex", true));
  }
  throw Error("pre_tokenizer: '" + type +
              "' is not supported (supported: Sequence of Split, Digits, Punctuation, Whitespace, "
              "WhitespaceSplit, then ByteLevel)");
}

}  // namespace

SplitStep::SplitStep(Regex pattern, SplitBehavior behavior, bool invert)
    : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

void SplitStep::split(std::string_view piece, std::vector<std::string_view>& out, PieceArena&,
                      UnicodeTables tables) const {
  thread_local std::vector<Span> matches;
  matches.clear();
  pattern_.find_all(piece, matches, tables);
  if (matches.empty() && !invert_) {
    out.push_back(piece);  // the common case for short pieces: nothing to split
    return;
  }
  apply_behavior(piece, matches, behavior_, invert_, out);
}

DigitsStep::DigitsStep(bool individual_digits) : individual_(individual_digits), numeric_("\\p{N}+") {}

void DigitsStep::split(std::string_view piece, std::vector<std::string_view>& out, PieceArena&,
                       UnicodeTables tables) const {
  if (is_ascii(piece)) {
    // ASCII has only 0-9 in \p{N}: split without the regex.
    size_t i = 0;
    while (i < piece.size()) {
      const bool digit = piece[i] >= '0' && piece[i] <= '9';
      size_t j = i + 1;
      if (!digit || !individual_) {
        while (j < piece.size() && (piece[j] >= '0' && piece[j] <= '9') == digit) ++j;
      }
      out.push_back(piece.substr(i, j - i));
      i = j;
    }
    return;
  }
  thread_local std::vector<Span> runs;
  runs.clear();
  numeric_.find_all(piece, runs, tables);
  uint32_t prev = 0;
  for (const Span& r : runs) {
    if (prev != r.begin) out.push_back(piece.substr(prev, r.begin - prev));
    if (!individual_) {
      out.push_back(piece.substr(r.begin, r.end - r.begin));
    } else {
      // One piece per numeric character.
      uint32_t c = r.begin;
      while (c < r.end) {
        const auto b = static_cast<unsigned char>(piece[c]);
        const uint32_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        out.push_back(piece.substr(c, len));
        c += len;
      }
    }
    prev = r.end;
  }
  if (prev != piece.size()) out.push_back(piece.substr(prev));
}

ByteLevelStep::ByteLevelStep(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
  if (use_regex) {
    gpt2_split_ = std::make_unique<SplitStep>(Regex(kGpt2SplitRegex), SplitBehavior::kIsolated, false);
  }
}

void ByteLevelStep::split(std::string_view piece, std::vector<std::string_view>& out, PieceArena& arena,
                          UnicodeTables tables) const {
  std::string_view p = piece;
  if (add_prefix_space_ && (p.empty() || p.front() != ' ')) {
    std::string& prefixed = arena.emplace_back();
    prefixed.reserve(p.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(p);
    p = prefixed;
  }
  if (gpt2_split_) {
    gpt2_split_->split(p, out, arena, tables);
  } else if (!p.empty()) {
    out.push_back(p);
  }
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config) {
  PreTokenizer pt;
  if (config.is_null()) throw Error("pre_tokenizer: missing, so this is not a byte-level BPE tokenizer");
  std::vector<const nlohmann::json*> entries;
  if (type_of(config) == "Sequence") {
    const auto list = config.find("pretokenizers");
    if (list == config.end() || !list->is_array())
      throw Error("pre_tokenizer: Sequence without a \"pretokenizers\" list");
    for (const auto& e : *list) {
      if (type_of(e) == "Sequence") throw Error("pre_tokenizer: nested Sequence is not supported");
      entries.push_back(&e);
    }
  } else {
    entries.push_back(&config);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    pt.steps_.push_back(make_step(*entries[i]));
    // After ByteLevel the text is in the byte alphabet; a later regex would see different characters.
    const bool byte_level = type_of(*entries[i]) == "ByteLevel";
    if (byte_level != (i + 1 == entries.size())) {
      throw Error("pre_tokenizer: must end with exactly one ByteLevel step (byte-level BPE)");
    }
  }
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces, PieceArena& arena,
                         UnicodeTables tables) const {
  thread_local std::vector<std::string_view> current, next;
  current.clear();
  if (!text.empty()) current.push_back(text);
  for (const auto& step : steps_) {
    next.clear();
    for (std::string_view p : current) step->split(p, next, arena, tables);
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
}

std::string spark_pre_tokenizer_json() {
  auto split = [](std::string_view regex) {
    return nlohmann::ordered_json{
        {"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  };
  // 1. numbers in groups of up to three, 2. runs of CJK ideographs / kana (U+4E00-9FA5, U+3040-309F,
  // U+30A0-30FF), 3. words, punctuation runs, newlines and spaces, 4. single digits, 5. bytes.
  const nlohmann::ordered_json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split("\\p{N}{1,3}"),
        split("[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+"),
        split("[!\"#$%&'()*+,\\-./"
              ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
              "?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+"),
        {{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  return pre.dump();
}

}  // namespace spark
