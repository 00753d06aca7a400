// The grammar compiler and matcher (src/grammar) on user-supplied constraints, walked over a vocabulary of
// the 256 single bytes and one end token: every mask of every step checked in full against the slow
// reference, and walks long enough to finish most constraints. It skips what only multi-byte tokens reach
// (grammar_fuzz.cpp keeps that) and so runs tens of times faster: the harness for the long campaign of the
// schema, regex and choice compilers. Properties and input layout: grammar_walk.h; seeds and dictionary are
// the grammar harness's (grammar_bytes.seeds).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar_walk.h"

namespace {

const spark::fuzz::GrammarWalk& walk() {
  static const spark::fuzz::GrammarWalk w = [] {
    std::vector<std::string> bytes(257);
    for (int b = 0; b < 256; ++b) bytes[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
    spark::fuzz::GrammarWalk out;
    out.vocab =
        std::make_shared<const spark::grammar::TokenVocab>(std::move(bytes), std::vector<int32_t>{256});
    out.end_id = 256;  // empty bytes, as a special token
    out.max_steps = 96;
    out.reference_stride = spark::fuzz::reference_stride_from_env(1);
    return out;
  }();
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return spark::fuzz::run_grammar_walk(walk(), data, size);
}
