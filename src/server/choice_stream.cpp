#include "server/choice_stream.h"

#include <set>

namespace spark {

bool hidden_token(const Tokenizer& tokenizer, int32_t id) {
  if (!tokenizer.contains(id)) return true;  // padding rows of the embedding have no text
  if (!tokenizer.is_special(id)) return false;
  static const std::set<std::string, std::less<>> kept = {
      "<think>",       "</think>",        "<tool_call>",      "</tool_call>", "<arg_key>",
      "</arg_key>",    "<arg_value>",     "</arg_value>",     "<tool_response>", "</tool_response>"};
  return kept.find(tokenizer.token_bytes(id)) == kept.end();
}

ChoiceStream::ChoiceStream(const Tokenizer& tokenizer, ChoiceConfig config)
    : tokenizer_(tokenizer), config_(std::move(config)), detok_(tokenizer, false), stop_(config_.stop) {
  if (config_.chat) {
    reasoning_parser_.emplace(config_.thinking);
    tool_parser_.emplace(config_.tools.is_array() ? config_.tools : nlohmann::json::array(), config_.calls_enabled);
  }
}

void ChoiceStream::route_text(const std::string& text, ChoiceDelta& out) {
  if (text.empty()) return;
  if (!reasoning_parser_) {
    out.content += text;
    return;
  }
  ReasoningDelta r = reasoning_parser_->feed(text);
  out.reasoning += r.reasoning;
  if (!r.content.empty()) {
    ToolParseDelta t = tool_parser_->feed(r.content);
    out.content += t.content;
    out.tool_calls.insert(out.tool_calls.end(), t.tool_calls.begin(), t.tool_calls.end());
  }
}

void ChoiceStream::accumulate(ChoiceDelta& d) {
  if (config_.single_call) {
    std::erase_if(d.tool_calls, [](const ToolCallDelta& c) { return c.index > 0; });
  }
  reasoning_ += d.reasoning;
  ToolParseDelta t{d.content, d.tool_calls};
  message_.append(t);
  tokens_.insert(tokens_.end(), d.tokens.begin(), d.tokens.end());
}

ChoiceDelta ChoiceStream::on_tokens(const std::vector<TokenEvent>& events) {
  ChoiceDelta out;
  for (const TokenEvent& ev : events) {
    if (stop_.stopped()) break;  // tokens past a stop string are not part of the answer
    out.tokens.push_back(ev);
    if (hidden_token(tokenizer_, ev.token)) continue;
    route_text(stop_.feed(detok_.push(ev.token)), out);
  }
  accumulate(out);
  return out;
}

ChoiceDelta ChoiceStream::finish(FinishReason reason) {
  ChoiceDelta out;
  if (finished_) return out;
  finished_ = true;
  if (!stop_.stopped()) route_text(stop_.feed(detok_.flush()), out);
  route_text(stop_.flush(), out);
  if (reasoning_parser_) {
    ReasoningDelta r = reasoning_parser_->finish();
    out.reasoning += r.reasoning;
    ToolParseDelta t = tool_parser_->feed(r.content);
    ToolParseDelta end = tool_parser_->finish();
    out.content += t.content + end.content;
    out.tool_calls.insert(out.tool_calls.end(), t.tool_calls.begin(), t.tool_calls.end());
    out.tool_calls.insert(out.tool_calls.end(), end.tool_calls.begin(), end.tool_calls.end());
  }
  accumulate(out);
  if (stop_.stopped()) {
    finish_reason_ = "stop";
  } else {
    finish_reason_ = reason == FinishReason::kLength ? "length" : "stop";
  }
  if (tool_parser_ && tool_parser_->has_calls() && finish_reason_ == "stop") finish_reason_ = "tool_calls";
  return out;
}

std::vector<ParseRecovery> ChoiceStream::recoveries() const {
  std::vector<ParseRecovery> all;
  if (reasoning_parser_) all = reasoning_parser_->recoveries();
  if (tool_parser_) all.insert(all.end(), tool_parser_->recoveries().begin(), tool_parser_->recoveries().end());
  return all;
}

}  // namespace spark
