// Per-request logits processors built from a chat request: a reasoning budget that forces </think>
// once the budget is spent, then a grammar from src/grammar: the tool-call syntax around the tools' schemas
// (tool_choice "required" or a named function; strict tools under "auto") or a structured output.
#pragma once

#include <memory>
#include <vector>

#include "server/openai_request.h"
#include "spark/engine.h"
#include "tokenizer/tokenizer.h"

namespace spark {

namespace grammar {
class CompiledGrammar;
class TokenVocab;
}  // namespace grammar

// Null when the request needs no processing. `thinking`: the prompt opened a <think> block. `tool_vocab`:
// the vocabulary tool-call grammars are compiled for (the tool-call tags as their tokens); `grammar`: the
// request's structured output, if any. A tool schema the engine cannot enforce: ApiError 400.
std::shared_ptr<LogitsProcessor> make_chat_logits_processor(
    const ChatRequest& req, bool thinking, const Tokenizer& tokenizer,
    const std::shared_ptr<const grammar::TokenVocab>& tool_vocab, int eos_token_id,
    std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr);

// The vocabulary structured outputs are compiled for: every token's bytes but the added tokens' (chat
// markers, <think>, <tool_call>...), which a constraint never picks for their text; `end_ids` end generation.
std::shared_ptr<const grammar::TokenVocab> make_grammar_vocab(const Tokenizer& tokenizer, int vocab_size,
                                                              std::vector<int32_t> end_ids);

// Structured outputs for a request without chat or thinking (completions): the grammar's masks, steered to
// the shortest completion as max_tokens runs out.
std::shared_ptr<LogitsProcessor> make_grammar_logits_processor(
    std::shared_ptr<const grammar::CompiledGrammar> grammar, int eos_token_id, int max_tokens);

}  // namespace spark
