// The grammar compiler and matcher (src/grammar) on user-supplied constraints: a JSON Schema, a regular
// expression or a vLLM choice list is compiled with the real engine, then a bounded walk picks allowed tokens
// of a real (synthetic Spark-layout, 2048-entry) tokenizer's vocabulary. A constraint the engine refuses must
// be a spark::Error; anything else thrown, a crash or a sanitizer report is a bug. Properties checked:
// - each mask equals the slow reference (the token's bytes run through the automaton), on a stride of the
//   vocabulary per step (every token at the first step), and the mask's count is its popcount;
// - an accepted token advances the matcher; after a token was accepted some token stays allowed (the engine
//   never leads the model into a prefix it cannot finish);
// - a walk that ends gives a text the constraint accepts: for a schema, JSON that json_valid passes; for a
//   regex, a full match of the same pattern compiled in search mode with anchors; for choices, one of them.
//
// Input: byte 0 % 3 picks the form (0 JSON Schema, 1 regex, 2 choices separated by '\n'); the rest up to the
// first NUL is the constraint's text, the bytes after it pick the walk's tokens (among those allowed).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "grammar/json_schema.h"
#include "grammar/json_validate.h"
#include "grammar/matcher.h"
#include "spark/error.h"

namespace {

using spark::fuzz::check;
namespace g = spark::grammar;

constexpr size_t kMaxConstraintBytes = 4096;  // compile cost grows with the text: keep each run short
constexpr int kMaxSteps = 24;
constexpr int32_t kReferenceStride = 8;  // tokens id % 8 == step % 8 checked against the slow reference

struct Vocab {
  std::shared_ptr<const g::TokenVocab> vocab;
  int32_t end_id = -1;
};

// The tokenizer's tokens as bytes (specials left out, as the server does), one special token ending.
const Vocab& vocab() {
  static const Vocab v = [] {
    const spark::Tokenizer& tok = spark::fuzz::spark_tokenizer();
    std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
    int32_t end = -1;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if (!tok.contains(id)) continue;
      if (tok.is_added(id)) {
        if (end < 0 && tok.is_special(id)) end = id;
        continue;
      }
      bytes[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
    }
    check(end >= 0, "the tokenizer has no special token");
    return Vocab{std::make_shared<const g::TokenVocab>(std::move(bytes), std::vector<int32_t>{end}), end};
  }();
  return v;
}

bool bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

std::vector<std::string> split_choices(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    const size_t nl = text.find('\n', begin);
    out.push_back(text.substr(begin, nl == std::string::npos ? std::string::npos : nl - begin));
    if (nl == std::string::npos) break;
    begin = nl + 1;
  }
  return out;
}

// The finished text against an oracle that does not walk the token automaton.
void check_complete(int form, const std::string& constraint, const std::vector<std::string>& choices,
                    const std::string& text) {
  if (form == 0) {
    nlohmann::ordered_json value, schema;
    try {
      value = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::out_of_range&) {
      return;  // valid JSON (RFC 8259 sets no range) whose number a double cannot hold: no oracle
    } catch (const nlohmann::json::exception& e) {
      spark::fuzz::fail("a completed schema text is not JSON", text + " | " + e.what());
    }
    schema = nlohmann::ordered_json::parse(constraint);  // compiled, so it parses
    bool valid = false;
    try {
      valid = g::json_valid(value, schema, schema);
    } catch (const spark::Error&) {
      return;  // a keyword the validator cannot evaluate exactly: no oracle
    }
    check(valid, "a completed text fails the schema", text);
  } else if (form == 1) {
    bool matches = false;
    try {
      matches = g::pattern_matches("^(?:" + constraint + ")$", text);
    } catch (const spark::Error&) {
      return;  // the wrapped pattern is not supported (anchors inside groups)
    }
    check(matches, "a completed text does not match the regex", text);
  } else {
    bool found = false;
    for (const auto& c : choices) found = found || c == text;
    check(found, "a completed text is not one of the choices", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int form = data[0] % 3;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string constraint = rest.substr(0, nul);
  const std::string picks = nul == std::string::npos ? std::string() : rest.substr(nul + 1);
  if (constraint.size() > kMaxConstraintBytes) return 0;

  const Vocab& v = vocab();
  std::vector<std::string> choices;
  std::shared_ptr<const g::CompiledGrammar> compiled;
  try {
    g::Grammar grammar;
    if (form == 0) {
      grammar = g::compile_json_schema(constraint);
    } else if (form == 1) {
      grammar = g::regex_grammar(constraint);
    } else {
      choices = split_choices(constraint);
      grammar = g::choice_grammar(choices);
    }
    compiled = std::make_shared<const g::CompiledGrammar>(std::move(grammar), v.vocab);
  } catch (const spark::Error&) {
    return 0;
  }

  g::GrammarMatcher m(compiled);
  std::vector<uint64_t> bits;
  std::string text;
  bool ended = false;
  for (int step = 0; step < kMaxSteps; ++step) {
    const size_t n = m.fill_mask(bits);
    size_t count = 0;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(v.vocab->size()); ++id) {
      const bool fast = bit(bits, id);
      if (fast) {
        ++count;
        allowed.push_back(id);
      }
      if (step == 0 || id % kReferenceStride == step % kReferenceStride) {
        check(fast == m.allows_token(id), "mask differs from the slow reference",
              "step " + std::to_string(step) + " token " + std::to_string(id) + " '" + v.vocab->bytes(id) +
                  "' after '" + text + "' mask " + std::to_string(fast));
      }
    }
    check(n == count, "fill_mask's count is not the mask's popcount");
    check(bit(bits, v.end_id) == m.can_end(), "the end token is allowed exactly when the grammar can end");
    if (allowed.empty()) {
      check(step == 0, "dead end: a prefix the grammar accepted cannot be completed", text);
      return 0;  // an empty language (e.g. an empty enum)
    }
    const size_t k = static_cast<size_t>(step) * 2;
    const size_t pick =
        k + 1 < picks.size()
            ? (static_cast<size_t>(static_cast<uint8_t>(picks[k])) << 8 | static_cast<uint8_t>(picks[k + 1]))
            : static_cast<size_t>(step) * 7919;
    const int32_t id = allowed[pick % allowed.size()];
    check(m.accept_token(id), "an allowed token was refused", std::to_string(id));
    if (id == v.end_id) {
      ended = true;
      break;
    }
    text += v.vocab->bytes(id);
  }
  check(ended == m.ended(), "ended() disagrees with the end token");
  if (ended || m.can_end()) check_complete(form, constraint, choices, text);
  return 0;
}
