// Per-request logits processors built from a chat request: a reasoning budget that forces </think>
// once the budget is spent, constrained decoding of a valid tool call for tool_choice "required"
// or a named function, and structured outputs (a grammar from src/grammar) after the reasoning.
#pragma once

#include <memory>

#include "server/openai_request.h"
#include "spark/engine.h"
#include "tokenizer/tokenizer.h"

namespace spark {

namespace grammar {
class CompiledGrammar;
}
class ConstraintVocab;

// Null when the request needs no processing. `thinking`: the prompt opened a <think> block.
std::shared_ptr<LogitsProcessor> make_chat_logits_processor(
    const ChatRequest& req, bool thinking, const Tokenizer& tokenizer,
    const std::shared_ptr<const ConstraintVocab>& vocab, int eos_token_id,
    std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr);

// Structured outputs for a request without chat or thinking (completions): the grammar's masks, steered to
// the shortest completion as max_tokens runs out.
std::shared_ptr<LogitsProcessor> make_grammar_logits_processor(
    std::shared_ptr<const grammar::CompiledGrammar> grammar, int eos_token_id, int max_tokens);

}  // namespace spark
