// Constrained decoding for tool_choice "required" or a named function: every token the sampler may pick keeps
// the output a valid Spark call,
// `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`, of an allowed tool, whose
// values fit the parameters' JSON schemas (strings without `<`; integer, number, boolean and null in their
// JSON forms; enum members; objects and arrays as JSON following their schemas; every required parameter
// present, none undeclared, none twice). After `</tool_call>` only an end token is allowed. Strings, numbers,
// arrays and free-form values are bounded (ToolCallConstraintOptions), so even a model with random weights
// finishes within a bounded number of tokens, and ToolCallParser turns the text into exactly that call
// without any recovery.
//
// How the server drives it: build one ConstraintVocab per model at start-up (token id -> decoded bytes, and
// the EOS ids). Per request with tool_choice "required" or {"type": "function", "function": {"name"}},
// construct a ToolCallConstraint (a bad tool_choice or an unusable schema throws spark::Error: answer 400).
// Apply it where the content starts (with thinking on, after `</think>`; or disable thinking for such
// requests). At each step: allowed_tokens(mask), set the logits of tokens with mask 0 to -inf, sample, then
// accept(token). Stop at the end token (allowed only once complete()). With a byte-level vocabulary (all 256
// single bytes are tokens) at least one token is always allowed; a return of 0 means the vocabulary cannot
// spell what must come next, and the request should fail rather than sample. Not thread-safe: one per
// request.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_call_constraint_grammar.h"
#include "server/tool_call_constraint_state.h"
#include "server/tool_call_constraint_vocab.h"

namespace spark {

class ToolCallConstraint {
 public:
  // `tools`: the request's OpenAI tools array. `forced_name`: the function tool_choice names; empty for
  // "required" (any of the tools).
  ToolCallConstraint(std::shared_ptr<const ConstraintVocab> vocab, const nlohmann::json& tools,
                     const std::string& forced_name = "", ToolCallConstraintOptions options = {});

  // mask[id] = 1 for every token that may come next, 0 otherwise (resized to the vocabulary); returns how
  // many are allowed.
  size_t allowed_tokens(std::vector<uint8_t>& mask) const;
  // Advances past a sampled token; throws spark::Error when it is not allowed.
  void accept(int32_t token);
  // Whether `token` may come next, by running its text through the automaton (the slow reference for
  // allowed_tokens, also handy for a sampler that checks one candidate).
  bool allows(int32_t token) const;

  // `</tool_call>` has been generated: only an end token may follow.
  bool complete() const { return state_.phase == ConstraintState::kDone; }
  // An end token has been accepted.
  bool ended() const { return ended_; }

 private:
  void walk(const TokenTrie& trie, uint8_t* mask) const;

  std::shared_ptr<const ConstraintVocab> vocab_;
  ConstraintGrammar grammar_;
  ConstraintState state_;
  bool ended_ = false;
  mutable std::vector<ConstraintState> scratch_;  // one state per trie depth during a walk
  mutable std::vector<uint32_t> edge_at_;
  mutable std::vector<uint32_t> edge_end_;
};

}  // namespace spark
