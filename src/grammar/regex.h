// Regular expressions (the ECMA-262 subset JSON Schema patterns use) compiled into grammar expressions, so
// they run in the grammar's automaton: Thompson's construction simulated state-set by state-set, linear in
// the input with no backtracking whatever the pattern. Unsupported syntax (backreferences, lookaround, word
// boundaries, anchors inside groups) is an error naming it, never silently dropped.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace spark::grammar {

struct RegexOptions {
  // Match the text of a JSON string's contents: characters that must be escaped in JSON (`"`, `\`, control
  // characters) are matched in their escaped forms.
  bool json_string = false;
  // JSON Schema `pattern` semantics: the match may be anywhere unless anchored with ^ / $. Otherwise the
  // whole text must match.
  bool search = false;
};

// Adds the pattern to `b` and returns its expression. Throws spark::Error on syntax it does not support.
ExprId compile_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options = {});

// One code point range in [lo, hi] as a grammar expression; with json_string, characters JSON escapes are
// matched escaped (`\"`, `\\`, `\n`, `\u001f`...).
ExprId codepoint_set(GrammarBuilder& b, const std::vector<std::pair<uint32_t, uint32_t>>& ranges,
                     bool json_string);

}  // namespace spark::grammar
