#include "server/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>

#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/structured_output.h"
#include "spark/error.h"

namespace spark {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Steps before the budget runs out from which every candidate token is checked to leave room for the rest.
constexpr int64_t kSteeringMargin = 12;
// Masks with at most this many tokens are checked against the budget at every step (a few milliseconds).
constexpr size_t kCheapBudgetCheck = 8192;

// Two phases: while a <think> block is open, count its tokens and force </think> when the reasoning
// budget is spent; afterwards (or from the start without thinking), keep every token inside the grammar (a
// structured output, or the tool-call syntax around the tools' schemas).
class ChatLogitsProcessor : public LogitsProcessor {
 public:
  // `required`: the grammar must be entered (a forced call, a structured reply), so the reasoning may not end
  // the output.
  ChatLogitsProcessor(bool thinking, int32_t think_end, std::optional<int> budget, bool required, int32_t eos,
                      std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr, int max_tokens = 0)
      : in_reasoning_(thinking && think_end >= 0),
        think_end_(think_end),
        budget_(budget),
        required_(required),
        eos_(eos),
        max_tokens_(max_tokens) {
    if (grammar) matcher_.emplace(std::move(grammar));
  }

  // The grammar's decision for the next token (its mask, or a token it must be), made while the engine's
  // forward pass runs. Nothing to prepare inside the reasoning: the budget is a count.
  void prepare() override {
    if (in_reasoning_ || !matcher_ || prepared_) return;
    // A failure (a grammar too costly to enforce) is kept: process() rethrows it, ending the request, rather
    // than doing the same work again.
    if (failure_) std::rethrow_exception(failure_);
    try {
      decide();
    } catch (const Error&) {
      failure_ = std::current_exception();
      throw;
    }
    prepared_ = true;
  }

  void process(std::span<float> logits) override {
    if (in_reasoning_) {
      if (budget_ && reasoning_tokens_ >= *budget_ && static_cast<size_t>(think_end_) < logits.size()) {
        force(logits, think_end_);
      } else if (required_ && matcher_ && eos_ >= 0 && static_cast<size_t>(eos_) < logits.size()) {
        // A required call or structured reply must still come: the reasoning may not end the output.
        logits[static_cast<size_t>(eos_)] = kNegInf;
      }
      return;
    }
    if (!matcher_) return;
    prepare();  // done already when the engine prepared it
    if (forced_ >= 0 && static_cast<size_t>(forced_) < logits.size()) {
      force(logits, forced_);
      return;
    }
    const size_t n = std::min(logits.size(), bits_.size() * 64);
    for (size_t i = 0; i < n; ++i) {
      if (!((bits_[i >> 6] >> (i & 63)) & 1)) logits[i] = kNegInf;
    }
    for (size_t i = n; i < logits.size(); ++i) logits[i] = kNegInf;
  }

  void accept(int32_t token) override {
    ++generated_;
    prepared_ = false;
    if (in_reasoning_) {
      ++reasoning_tokens_;
      if (token == think_end_) in_reasoning_ = false;
      return;
    }
    if (matcher_) matcher_->accept_token(token);  // a refused token can only come from a later processor
  }

 private:
  static void force(std::span<float> logits, int32_t id) {
    const float keep = logits[static_cast<size_t>(id)];
    std::fill(logits.begin(), logits.end(), kNegInf);
    logits[static_cast<size_t>(id)] = std::isfinite(keep) ? keep : 0.0f;
  }

  // Grammar masks, steered as max_tokens runs out: while one token a byte still fits the shortest
  // completion, only the tokens after which it still does; once it no longer does, that completion in the
  // fewest whole tokens (tags and words as single tokens), token by token, so a constrained reply parses
  // whenever its shortest form can fit at all. Sets forced_ (a token that must come) or bits_.
  void decide() {
    forced_ = -1;
    if (matcher_->ended()) {
      forced_ = eos_;
      return;
    }
    size_t allowed = matcher_->fill_mask(bits_);
    if (max_tokens_ > 0 && allowed > 0) {
      // After this token, `left - 1` tokens must still hold the rest and the end token.
      const int64_t left = static_cast<int64_t>(max_tokens_) - generated_;
      const int64_t need = static_cast<int64_t>(matcher_->min_completion_bytes());
      if (left < need + 2) {
        // One token a byte no longer fits: the shortest completion in whole tokens, token by token (when
        // the vocabulary cannot spell it, one byte a token as far as it goes).
        const std::vector<int32_t> plan = matcher_->shortest_completion_tokens();
        if (!plan.empty() && static_cast<size_t>(plan[0]) < bits_.size() * 64) {
          forced_ = plan[0];
          return;
        }
        allowed = matcher_->restrict_to_shortest(bits_);
      } else if (left <= need + 2 + kSteeringMargin || allowed <= kCheapBudgetCheck) {
        // Near the end every token is checked; before that, only where few tokens are allowed (a tool's
        // name, a key, a number), which is where one token can commit to a long completion.
        allowed = matcher_->restrict_to_budget(bits_, static_cast<uint32_t>(left - 2));
      }
    }
    // Nothing the vocabulary can spell continues the grammar: end rather than emit garbage.
    if (allowed == 0) forced_ = eos_;
  }

  bool in_reasoning_;
  int32_t think_end_;
  std::optional<int> budget_;
  int reasoning_tokens_ = 0;
  bool required_;
  int32_t eos_;
  int max_tokens_;
  int64_t generated_ = 0;
  std::optional<grammar::GrammarMatcher> matcher_;
  bool prepared_ = false;       // bits_ / forced_ hold the decision for the next token
  std::exception_ptr failure_;  // what the grammar's last decision failed with
  int32_t forced_ = -1;
  std::vector<uint64_t> bits_;
};

// Reasoning allowed before a forced tool call or structured reply when the request sets no budget: without
// one, a model that never closes its <think> block would never reach it.
constexpr int kDefaultForcedCallReasoningBudget = 256;

}  // namespace

std::shared_ptr<const grammar::TokenVocab> make_grammar_vocab(const Tokenizer& tokenizer, int vocab_size,
                                                              std::vector<int32_t> end_ids) {
  std::vector<std::string> texts(static_cast<size_t>(vocab_size));
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (tokenizer.contains(id) && !tokenizer.is_added(id))
      texts[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
  }
  return std::make_shared<const grammar::TokenVocab>(std::move(texts), std::move(end_ids));
}

std::shared_ptr<LogitsProcessor> make_grammar_logits_processor(
    std::shared_ptr<const grammar::CompiledGrammar> grammar, int eos_token_id, int max_tokens) {
  return std::make_shared<ChatLogitsProcessor>(false, -1, std::nullopt, true, eos_token_id,
                                               std::move(grammar), max_tokens);
}

std::shared_ptr<LogitsProcessor> make_chat_logits_processor(
    const ChatRequest& req, bool thinking, const Tokenizer& tokenizer,
    const std::shared_ptr<const grammar::TokenVocab>& tool_vocab, int eos_token_id,
    std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  const bool forced =
      req.tool_choice == ToolChoiceMode::kRequired || req.tool_choice == ToolChoiceMode::kNamed;
  const bool calls_enabled = !req.tools.is_null() && req.tool_choice != ToolChoiceMode::kNone;
  // A forced call replaces any structured output; under "auto" a structured output rules the reply, else
  // strict tools constrain the calls the model opens.
  bool required = forced || grammar != nullptr;
  if (forced || (calls_enabled && !grammar)) {
    // A named function is called once, as vLLM does; "required" and "auto" call as many as
    // parallel_tool_calls allows.
    const bool named = req.tool_choice == ToolChoiceMode::kNamed;
    auto tools = calls_enabled
                     ? compile_tool_call_grammar(req.tools, forced, named ? req.tool_choice_name : "",
                                                 req.parallel_tool_calls && !named, tool_vocab)
                     : nullptr;
    if (tools || forced) grammar = std::move(tools);
  }
  std::optional<int> budget = req.reasoning_budget;
  // An effort's budget is a ceiling, not a demand: a forced call or structured reply keeps half the tokens.
  if (budget && req.reasoning_budget_from_effort && required)
    budget = std::min(*budget, req.sampling.max_tokens / 2);
  if (!grammar && !(thinking && budget)) return nullptr;
  const std::optional<int32_t> think_end = tokenizer.token_to_id("</think>");
  if (thinking && (budget || (grammar && required)) && !think_end)
    throw ApiError::bad_request("this model's vocabulary has no </think> token", "max_reasoning_tokens");
  if (thinking && grammar && required) {
    // Reasoning must leave room for the reply: at most half the tokens by default, and never so many that
    // the reply's shortest form (and </think>, and the end token) no longer fits.
    if (!budget) budget = std::min(kDefaultForcedCallReasoningBudget, req.sampling.max_tokens / 2);
    const auto shortest =
        static_cast<int>(grammar::GrammarMatcher(grammar).shortest_completion_tokens().size());
    budget = std::max(0, std::min(*budget, req.sampling.max_tokens - shortest - 2));
  }
  return std::make_shared<ChatLogitsProcessor>(thinking, think_end.value_or(-1), budget, required,
                                               eos_token_id, std::move(grammar), req.sampling.max_tokens);
}

}  // namespace spark
