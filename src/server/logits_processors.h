// Per-request logits processors built from a chat request: a reasoning budget that forces </think>
// once the budget is spent, and constrained decoding of a valid tool call for tool_choice "required"
// or a named function.
#pragma once

#include <memory>

#include "server/openai_request.h"
#include "spark/engine.h"
#include "tokenizer/tokenizer.h"

namespace spark {

class ConstraintVocab;

// Null when the request needs no processing. `thinking`: the prompt opened a <think> block.
std::shared_ptr<LogitsProcessor> make_chat_logits_processor(const ChatRequest& req, bool thinking,
                                                            const Tokenizer& tokenizer,
                                                            const std::shared_ptr<const ConstraintVocab>& vocab,
                                                            int eos_token_id);

}  // namespace spark
