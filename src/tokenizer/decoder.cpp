#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "spark/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace spark {

namespace {

// All tokens become one string: each token's characters mapped back to bytes (a token with a
// character outside the byte alphabet, such as an added token, stays as its own UTF-8), invalid UTF-8
// replaced by U+FFFD.
class ByteLevelDecoderStep : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string bytes, one;
    for (const std::string& t : tokens) {
      if (byte_level::decode(t, one)) {
        bytes += one;
      } else {
        bytes += t;
      }
    }
    std::string text;
    utf8::append_lossy(bytes, text);
    tokens.assign(1, std::move(text));
  }
};

// Every match in every token replaced by `content`.
class ReplaceDecoderStep : public DecoderStep {
 public:
  ReplaceDecoderStep(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<Span> matches;
    for (std::string& t : tokens) {
      if (utf8::find_invalid(t) != std::string::npos) continue;  // the regex needs valid UTF-8
      matches.clear();
      pattern_.find_all(t, matches);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (const Span& m : matches) {
        out.append(t, prev, m.begin - prev);
        out += content_;
        prev = m.end;
      }
      out.append(t, prev, std::string::npos);
      t.swap(out);
    }
  }

 private:
  Regex pattern_;
  std::string content_;
};

// Up to `start` leading and `stop` trailing occurrences of one character removed from every token.
class StripDecoderStep : public DecoderStep {
 public:
  StripDecoderStep(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override {
    const size_t n = content_.size();
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t i = 0; i < start_ && end - begin >= n && t.compare(begin, n, content_) == 0; ++i)
        begin += n;
      for (size_t i = 0; i < stop_ && end - begin >= n && t.compare(end - n, n, content_) == 0; ++i) end -= n;
      if (begin != 0 || end != t.size()) t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class FuseDecoderStep : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

std::string type_of(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("decoder entry must be an object, got " + j.dump());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) throw Error("decoder entry without a \"type\"");
  return it->get<std::string>();
}

size_t count_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) {
    throw Error(std::string("decoder Strip: \"") + key + "\" must be a non-negative integer");
  }
  return it->get<size_t>();
}

void add_steps(const nlohmann::json& j, std::vector<std::unique_ptr<DecoderStep>>& steps, bool& byte_level,
               int depth) {
  const std::string type = type_of(j);
  if (type == "Sequence") {
    if (depth > 16) throw Error("decoder: Sequence nested too deeply");
    auto list = j.find("decoders");
    if (list == j.end() || !list->is_array()) throw Error("decoder: Sequence without a \"decoders\" list");
    for (const auto& e : *list) add_steps(e, steps, byte_level, depth + 1);
  } else if (type == "ByteLevel") {
    steps.push_back(std::make_unique<ByteLevelDecoderStep>());
    byte_level = true;
  } else if (type == "Replace") {
    auto pattern = j.find("pattern");
    auto content = j.find("content");
    if (pattern == j.end() || !pattern->is_object() || content == j.end() || !content->is_string()) {
      throw Error("decoder Replace: needs a \"pattern\" object and a \"content\" string");
    }
    if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
      steps.push_back(
          std::make_unique<ReplaceDecoderStep>(Regex(r->get<std::string>()), content->get<std::string>()));
    } else if (auto s = pattern->find("String");
               s != pattern->end() && s->is_string() && !s->get<std::string>().empty()) {
      steps.push_back(std::make_unique<ReplaceDecoderStep>(Regex(s->get<std::string>(), true),
                                                           content->get<std::string>()));
    } else {
      throw Error("decoder Replace: pattern must be {\"Regex\": ...} or a non-empty {\"String\": ...}");
    }
  } else if (type == "Strip") {
    auto content = j.find("content");
    if (content == j.end() || !content->is_string())
      throw Error("decoder Strip: \"content\" must be a character");
    const std::string c = content->get<std::string>();
    const auto* p = reinterpret_cast<const unsigned char*>(c.data());
    if (c.empty() || utf8::find_invalid(c) != std::string::npos ||
        utf8::step(p, c.size()).length != c.size()) {
      throw Error("decoder Strip: \"content\" must be one character");
    }
    steps.push_back(std::make_unique<StripDecoderStep>(c, count_field(j, "start"), count_field(j, "stop")));
  } else if (type == "Fuse") {
    steps.push_back(std::make_unique<FuseDecoderStep>());
  } else {
    throw Error("decoder '" + type +
                "' is not supported (byte-level BPE: ByteLevel, or a Sequence of ByteLevel with Replace, "
                "Strip, Fuse)");
  }
}

}  // namespace

Decoder::Decoder() = default;
Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

Decoder Decoder::from_json(const nlohmann::json& config) {
  if (config.is_null()) throw Error("decoder: missing (byte-level BPE needs a ByteLevel decoder)");
  Decoder d;
  bool byte_level = false;
  add_steps(config, d.steps_, byte_level, 0);
  if (!byte_level) throw Error("decoder: has no ByteLevel step (byte-level BPE needs one)");
  d.plain_byte_level_ = d.steps_.size() == 1;
  return d;
}

Decoder Decoder::byte_level() {
  Decoder d;
  d.steps_.push_back(std::make_unique<ByteLevelDecoderStep>());
  d.plain_byte_level_ = true;
  return d;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const auto& step : steps_) step->apply(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace spark
