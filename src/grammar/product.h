// Intersections of regular languages: call-free grammar expressions run in lockstep over bytes and
// determinized (subset construction per part, product across parts), so JSON Schema keywords that each
// constrain the same text (pattern with maxLength, a property name against several patternProperties) are
// enforced together, exactly.
#pragma once

#include <functional>
#include <vector>

#include "grammar/grammar.h"

namespace spark::grammar {

struct ProductPart {
  ExprId expr;    // call-free
  bool required;  // the text must stay a prefix of this part's language (and match it to exit)
};

// The text is a prefix of every required part; where every required part matches, exit_of(matched: one flag
// per part, in order) gives the expression that may follow (b.nothing() for none). States from which no exit
// is reachable are dropped. Throws spark::Error when a part calls a rule or the product would exceed
// `max_states`.
ExprId product_dfa(GrammarBuilder& b, const std::vector<ProductPart>& parts,
                   const std::function<ExprId(const std::vector<bool>& matched)>& exit_of,
                   size_t max_states = 10000);

}  // namespace spark::grammar
