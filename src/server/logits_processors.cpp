#include "server/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/tool_call_constraint.h"
#include "spark/error.h"

namespace spark {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Steps before the budget runs out from which every candidate token is checked to leave room for the rest.
constexpr int64_t kSteeringMargin = 12;

// Two phases: while a <think> block is open, count its tokens and force </think> when the reasoning
// budget is spent; afterwards (or from the start without thinking), keep every token inside a valid tool
// call when one is required.
class ChatLogitsProcessor : public LogitsProcessor {
 public:
  ChatLogitsProcessor(bool thinking, int32_t think_end, std::optional<int> budget,
                      std::unique_ptr<ToolCallConstraint> constraint, int32_t eos,
                      std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr, int max_tokens = 0)
      : in_reasoning_(thinking && think_end >= 0),
        think_end_(think_end),
        budget_(budget),
        constraint_(std::move(constraint)),
        eos_(eos),
        max_tokens_(max_tokens) {
    if (grammar) matcher_.emplace(std::move(grammar));
  }

  void process(std::span<float> logits) override {
    if (in_reasoning_) {
      if (budget_ && reasoning_tokens_ >= *budget_ && static_cast<size_t>(think_end_) < logits.size()) {
        force(logits, think_end_);
      } else if ((constraint_ || matcher_) && eos_ >= 0 && static_cast<size_t>(eos_) < logits.size()) {
        // A required call or structured reply must still come: the reasoning may not end the output.
        logits[static_cast<size_t>(eos_)] = kNegInf;
      }
      return;
    }
    if (matcher_) {
      constrain_by_grammar(logits);
      return;
    }
    if (!constraint_) return;
    if (constraint_->ended()) {
      force(logits, eos_);
      return;
    }
    const size_t allowed = constraint_->allowed_tokens(mask_);
    if (allowed == 0) {  // the vocabulary cannot spell what must come next: end rather than emit garbage
      force(logits, eos_);
      return;
    }
    const size_t n = std::min(logits.size(), mask_.size());
    for (size_t i = 0; i < n; ++i) {
      if (!mask_[i]) logits[i] = kNegInf;
    }
    for (size_t i = n; i < logits.size(); ++i) logits[i] = kNegInf;
  }

  void accept(int32_t token) override {
    ++generated_;
    if (in_reasoning_) {
      ++reasoning_tokens_;
      if (token == think_end_) in_reasoning_ = false;
      return;
    }
    if (matcher_) {
      matcher_->accept_token(token);  // a refused token can only come from a later processor
      return;
    }
    if (constraint_ && !constraint_->ended()) {
      try {
        constraint_->accept(token);
      } catch (const Error&) {
        // Only reachable if something after this processor changed the choice; the parser reports it.
      }
    }
  }

 private:
  static void force(std::span<float> logits, int32_t id) {
    const float keep = logits[static_cast<size_t>(id)];
    std::fill(logits.begin(), logits.end(), kNegInf);
    logits[static_cast<size_t>(id)] = std::isfinite(keep) ? keep : 0.0f;
  }

  // Grammar masks, steered to the shortest completion once the tokens left only just fit it (one token per
  // byte, plus the end token), so a constrained reply still parses when max_tokens runs short.
  void constrain_by_grammar(std::span<float> logits) {
    if (matcher_->ended()) {
      force(logits, eos_);
      return;
    }
    size_t allowed = matcher_->fill_mask(bits_);
    if (max_tokens_ > 0) {
      // After this token, `left - 1` tokens must still spell the rest one byte a token, and the end token.
      const int64_t left = static_cast<int64_t>(max_tokens_) - generated_;
      const int64_t need = static_cast<int64_t>(matcher_->min_completion_bytes());
      if (left < need + 2) {
        allowed =
            matcher_->restrict_to_shortest(bits_);  // already too tight: the shortest way, as far as it goes
      } else if (left <= need + 2 + kSteeringMargin) {
        allowed = matcher_->restrict_to_budget(bits_, static_cast<uint32_t>(left - 2));
      }
    }
    if (allowed ==
        0) {  // nothing the vocabulary can spell continues the grammar: end rather than emit garbage
      force(logits, eos_);
      return;
    }
    const size_t n = std::min(logits.size(), bits_.size() * 64);
    for (size_t i = 0; i < n; ++i) {
      if (!((bits_[i >> 6] >> (i & 63)) & 1)) logits[i] = kNegInf;
    }
    for (size_t i = n; i < logits.size(); ++i) logits[i] = kNegInf;
  }

  bool in_reasoning_;
  int32_t think_end_;
  std::optional<int> budget_;
  int reasoning_tokens_ = 0;
  std::unique_ptr<ToolCallConstraint> constraint_;
  int32_t eos_;
  std::vector<uint8_t> mask_;
  int max_tokens_;
  int64_t generated_ = 0;
  std::optional<grammar::GrammarMatcher> matcher_;
  std::vector<uint64_t> bits_;
};

// Reasoning allowed before a forced tool call when the request sets no budget: without one, a model
// that never closes its <think> block would never reach the call.
constexpr int kDefaultForcedCallReasoningBudget = 256;

}  // namespace

std::shared_ptr<LogitsProcessor> make_grammar_logits_processor(
    std::shared_ptr<const grammar::CompiledGrammar> grammar, int eos_token_id, int max_tokens) {
  return std::make_shared<ChatLogitsProcessor>(false, -1, std::nullopt, nullptr, eos_token_id,
                                               std::move(grammar), max_tokens);
}

std::shared_ptr<LogitsProcessor> make_chat_logits_processor(
    const ChatRequest& req, bool thinking, const Tokenizer& tokenizer,
    const std::shared_ptr<const ConstraintVocab>& vocab, int eos_token_id,
    std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  const bool forced =
      req.tool_choice == ToolChoiceMode::kRequired || req.tool_choice == ToolChoiceMode::kNamed;
  std::optional<int> budget = req.reasoning_budget;
  // An effort's budget is a ceiling, not a demand: a forced call or structured reply keeps half the tokens.
  if (budget && req.reasoning_budget_from_effort && (forced || grammar))
    budget = std::min(*budget, req.sampling.max_tokens / 2);
  if (grammar && !forced) {
    const std::optional<int32_t> think_end = tokenizer.token_to_id("</think>");
    if (thinking && !think_end) throw ApiError::bad_request("this model's vocabulary has no </think> token");
    // As for forced calls: reasoning must leave room for the structured reply.
    if (thinking && !budget)
      budget = std::min(kDefaultForcedCallReasoningBudget, req.sampling.max_tokens / 2);
    return std::make_shared<ChatLogitsProcessor>(thinking, think_end.value_or(-1), budget, nullptr,
                                                 eos_token_id, std::move(grammar), req.sampling.max_tokens);
  }
  if (!forced && !(thinking && budget)) return nullptr;
  const std::optional<int32_t> think_end = tokenizer.token_to_id("</think>");
  if (budget && !think_end)
    throw ApiError::bad_request("this model's vocabulary has no </think> token", "max_reasoning_tokens");
  std::unique_ptr<ToolCallConstraint> constraint;
  if (forced) {
    try {
      constraint = std::make_unique<ToolCallConstraint>(
          vocab, nlohmann::json::parse(req.tools.dump()),
          req.tool_choice == ToolChoiceMode::kNamed ? req.tool_choice_name : "");
    } catch (const Error& e) {
      throw ApiError::bad_request(std::string("cannot constrain decoding to these tools: ") + e.what(),
                                  "tools");
    }
    if (thinking && !budget)
      budget = std::min(kDefaultForcedCallReasoningBudget, req.sampling.max_tokens / 2);
  }
  return std::make_shared<ChatLogitsProcessor>(thinking, think_end.value_or(-1), budget,
                                               std::move(constraint), eos_token_id);
}

}  // namespace spark
