// The grammar compiler and matcher (src/grammar) on user-supplied constraints, walked over a real
// (synthetic Spark-layout, 2048-entry) tokenizer's vocabulary: multi-byte tokens, the token trie and the
// shared state masks. Properties and input layout: grammar_walk.h. At a few dozen executions per second
// under ASan this is the deep harness; grammar_bytes runs the same checks over single bytes, fast enough
// for a long campaign.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "grammar_walk.h"

namespace {

// The tokenizer's tokens as bytes (specials left out, as the server does), one special token ending.
const spark::fuzz::GrammarWalk& walk() {
  static const spark::fuzz::GrammarWalk w = [] {
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
    spark::fuzz::check(end >= 0, "the tokenizer has no special token");
    spark::fuzz::GrammarWalk out;
    out.vocab =
        std::make_shared<const spark::grammar::TokenVocab>(std::move(bytes), std::vector<int32_t>{end});
    out.end_id = end;
    out.max_steps = 24;
    // Every token at the first step, 1/8 of them per later step.
    out.reference_stride = spark::fuzz::reference_stride_from_env(8);
    return out;
  }();
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return spark::fuzz::run_grammar_walk(walk(), data, size);
}
