#include "server/tool_call_parser.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

#include "server/tool_call_parser_syntax.h"

namespace spark {

namespace {

constexpr size_t kMaxCallName = 256;  // beyond this, `<tool_call>` is not followed by a name

CallIdGenerator ids_from(std::shared_ptr<std::mt19937_64> engine) {
  return [engine] {
    static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::uniform_int_distribution<int> pick(0, 61);
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kAlnum[pick(*engine)];
    return id;
  };
}

}  // namespace

using tool_syntax::dump;
using tool_syntax::is_space;
using tool_syntax::kCallClose;
using tool_syntax::kCallOpen;
using tool_syntax::kKeyClose;
using tool_syntax::kKeyOpen;
using tool_syntax::kValueClose;
using tool_syntax::kValueOpen;
using tool_syntax::match_tag;
using tool_syntax::trim;

nlohmann::json ToolCallDelta::to_openai() const {
  nlohmann::json delta = {{"index", index}};
  nlohmann::json function = nlohmann::json::object();
  if (!id.empty()) {
    delta["id"] = id;
    delta["type"] = "function";
    function["name"] = name;
  }
  function["arguments"] = arguments;
  delta["function"] = std::move(function);
  return delta;
}

void ParsedMessage::append(const ToolParseDelta& delta) {
  content += delta.content;
  for (const ToolCallDelta& call : delta.tool_calls) {
    if (call.index >= tool_calls.size()) tool_calls.resize(call.index + 1);
    ParsedToolCall& target = tool_calls[call.index];
    if (!call.id.empty()) {
      target.id = call.id;
      target.name = call.name;
    }
    target.arguments += call.arguments;
  }
}

CallIdGenerator random_call_ids() {
  std::random_device device;
  return ids_from(std::make_shared<std::mt19937_64>((uint64_t{device()} << 32) ^ device()));
}

CallIdGenerator seeded_call_ids(uint64_t seed) {
  return ids_from(std::make_shared<std::mt19937_64>(seed));
}

ToolCallParser::ToolCallParser(ToolRegistry tools, bool calls_enabled, CallIdGenerator ids)
    : tools_(std::move(tools)),
      enabled_(calls_enabled),
      recover_json_(calls_enabled && !tools_.empty()),
      ids_(std::move(ids)) {}

ToolCallParser::ToolCallParser(const nlohmann::json& tools, bool calls_enabled, CallIdGenerator ids)
    : ToolCallParser(ToolRegistry(tools), calls_enabled, std::move(ids)) {}

ToolParseDelta ToolCallParser::feed(std::string_view chunk) {
  if (!enabled_) return {std::string(chunk), {}};
  buf_.append(chunk);
  while (step()) {
  }
  // Consumed bytes are dropped once they dominate the buffer; offsets are relative to pos_, so this is free.
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return std::exchange(out_, {});
}

ToolParseDelta ToolCallParser::finish() {
  if (!enabled_ || eof_) return {};
  eof_ = true;
  while (step()) {
  }
  if (tool_ != nullptr) {  // every state closes its call at the end of output; this is a safety net
    record("missing_tool_call_close", tool_->name);
    end_call();
  }
  if (!rest().empty()) release(rest().size());
  return std::exchange(out_, {});
}

bool ToolCallParser::step() {
  switch (state_) {
    case State::kText:
      return step_text();
    case State::kAfterCall:
      return step_after_call();
    case State::kBracket:
      return step_bracket();
    case State::kJson:
      return step_json();
    case State::kPassthroughJson:
      return step_passthrough_json();
    case State::kCallName:
      return step_call_name();
    case State::kUnknownCall:
      return step_unknown_call();
    case State::kCallBody:
      return step_call_body();
    case State::kArgKey:
      return step_arg_key();
    case State::kAfterKey:
      return step_after_key();
    case State::kArgValue:
      return step_arg_value();
  }
  return false;
}

bool ToolCallParser::step_text() {
  const std::string_view s = rest();
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<') {
      bool partial = false;
      if (match_tag(s.substr(i), {kCallOpen}, eof_, partial) == 0) {
        release(i);
        state_ = State::kCallName;
        scan_ = kCallOpen.size();
        return true;
      }
      if (partial) {
        release(i);
        return false;
      }
    } else if (recover_json_ && c == '[') {
      release(i);
      state_ = State::kBracket;
      scan_ = 1;
      return true;
    } else if (recover_json_ && c == '{') {
      release(i);
      start_json(JsonMode::kBare, 0);
      return true;
    }
  }
  release(s.size());
  return false;
}

bool ToolCallParser::step_after_call() {
  const std::string_view s = rest();
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  if (i == s.size()) {
    if (!eof_) return false;
    consume(i);  // trailing whitespace after the last call is not content
    state_ = State::kText;
    return true;
  }
  bool partial = false;
  if (match_tag(s.substr(i), {kCallOpen}, eof_, partial) == 0) {
    consume(i);  // whitespace between two calls is not content either
  } else if (partial) {
    return false;
  }
  state_ = State::kText;
  return true;
}

bool ToolCallParser::step_call_name() {
  const std::string_view s = rest();
  size_t i = kCallOpen.size();
  bool newline = false;
  while (i < s.size() && is_space(s[i])) newline |= s[i++] == '\n';
  if (i == s.size()) {
    if (!eof_) return false;
    record("unparsable_tool_call", std::string(s));
    release(s.size());
    state_ = State::kText;
    return true;
  }
  if (s[i] == '{') {
    start_json(JsonMode::kInCall, i);
    return true;
  }
  const size_t begin = i;
  while (i < s.size() && !is_space(s[i]) && s[i] != '<' && s[i] != '{' && i - begin <= kMaxCallName) ++i;
  if (i == s.size() && !eof_) return false;
  const std::string_view name = s.substr(begin, i - begin);
  if (name.empty() || name.size() > kMaxCallName) {
    record("unparsable_tool_call", std::string(s.substr(0, i)));
    release(i);
    state_ = State::kUnknownCall;
    return true;
  }
  const ToolInfo* tool = tools_.find(name);
  if (tool == nullptr) {
    record("unknown_tool", std::string(name));
    release(i);
    state_ = State::kUnknownCall;
    return true;
  }
  consume(i);
  begin_call(*tool);
  if (newline || begin != kCallOpen.size()) note_whitespace();
  state_ = State::kCallBody;
  return true;
}

bool ToolCallParser::step_unknown_call() {
  const std::string_view s = rest();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '<') continue;
    bool partial = false;
    const int tag = match_tag(s.substr(i), {kCallClose, kCallOpen}, eof_, partial);
    if (tag == 0) {
      release(i + kCallClose.size());
      state_ = State::kText;
      return true;
    }
    if (tag == 1) {
      release(i);
      state_ = State::kText;
      return true;
    }
    if (partial) {
      release(i);
      return false;
    }
  }
  release(s.size());
  return false;
}

bool ToolCallParser::step_call_body() {
  std::string_view s = rest();
  size_t ws = 0;
  while (ws < s.size() && is_space(s[ws])) ++ws;
  if (ws > 0) {
    consume(ws);
    note_whitespace();
    s = rest();
  }
  if (s.empty()) {
    if (!eof_) return false;
    record("missing_tool_call_close", tool_->name);
    end_call();
    state_ = State::kText;
    return true;
  }
  if (s[0] == '<') {
    bool partial = false;
    switch (
        match_tag(s, {kKeyOpen, kCallClose, kCallOpen, kKeyClose, kValueOpen, kValueClose}, eof_, partial)) {
      case 0:
        consume(kKeyOpen.size());
        state_ = State::kArgKey;
        scan_ = 0;
        return true;
      case 1:
        consume(kCallClose.size());
        end_call();
        state_ = State::kAfterCall;
        return true;
      case 2:
        record("missing_tool_call_close", tool_->name);
        end_call();
        state_ = State::kText;
        return true;
      case 3:
        record("stray_arg_key_close", tool_->name);
        consume(kKeyClose.size());
        return true;
      case 4:
        record("value_without_key", tool_->name);
        consume(kValueOpen.size());
        value_skip_ = true;
        start_value();
        return true;
      case 5:
        record("stray_arg_value_close", tool_->name);
        consume(kValueClose.size());
        return true;
      default:
        if (partial) return false;
    }
  } else if (s[0] == '{' && args_emitted_ == 0 && !args_from_json_) {
    record("json_arguments", tool_->name);
    start_json(JsonMode::kArguments, 0);
    return true;
  }
  // Text that is no part of the syntax: a key missing its `<arg_key>` if `</arg_key>` follows, else dropped.
  const size_t lt = s.find('<', 1);
  if (lt == std::string_view::npos) {
    if (!eof_) return false;
    record("dropped_text", std::string(s));
    consume(s.size());
    return true;
  }
  bool partial = false;
  if (match_tag(s.substr(lt), {kKeyClose}, eof_, partial) == 0) {
    record("missing_arg_key_open", std::string(trim(s.substr(0, lt))));
    on_key(s.substr(0, lt));
    consume(lt + kKeyClose.size());
    return true;
  }
  if (partial) return false;
  record("dropped_text", std::string(s.substr(0, lt)));
  consume(lt);
  return true;
}

bool ToolCallParser::step_arg_key() {
  const std::string_view s = rest();
  for (size_t i = scan_; i < s.size(); ++i) {
    if (s[i] != '<') continue;
    bool partial = false;
    const int tag = match_tag(
        s.substr(i), {kKeyClose, kValueOpen, kKeyOpen, kValueClose, kCallClose, kCallOpen}, eof_, partial);
    if (tag == 0 || tag == 1) {
      if (tag == 1) record("missing_arg_key_close", std::string(trim(s.substr(0, i))));
      on_key(s.substr(0, i));
      consume(i + (tag == 0 ? kKeyClose.size() : kValueOpen.size()));
      if (tag == 1) start_value();
      return true;
    }
    if (tag > 1) {
      record("unterminated_arg_key", std::string(s.substr(0, i)));
      consume(i);
      state_ = State::kCallBody;
      return true;
    }
    if (partial) {
      scan_ = i;
      return false;
    }
  }
  scan_ = s.size();
  if (!eof_) return false;
  record("unterminated_arg_key", std::string(s));
  consume(s.size());
  state_ = State::kCallBody;
  return true;
}

void ToolCallParser::on_key(std::string_view raw) {
  const std::string_view key = trim(raw);
  if (key.size() != raw.size()) note_whitespace();
  state_ = State::kAfterKey;
  key_ = key;
  value_skip_ = true;
  if (key.empty()) {
    record("empty_arg_key", tool_->name);
  } else if (std::find(keys_.begin(), keys_.end(), key_) != keys_.end()) {
    record("duplicate_argument", key_);
  } else if (args_from_json_) {
    record("dropped_argument", key_);  // the arguments already came as one JSON object
  } else {
    value_skip_ = false;
    keys_.push_back(key_);
  }
}

bool ToolCallParser::step_after_key() {
  std::string_view s = rest();
  size_t ws = 0;
  while (ws < s.size() && is_space(s[ws])) ++ws;
  if (ws > 0) {
    consume(ws);
    note_whitespace();
    s = rest();
  }
  if (s.empty()) {
    if (!eof_) return false;
    record("missing_arg_value", key_);
    state_ = State::kCallBody;
    return true;
  }
  if (s[0] == '<') {
    bool partial = false;
    switch (match_tag(s, {kValueOpen, kKeyClose, kKeyOpen, kCallClose, kCallOpen}, eof_, partial)) {
      case 0:
        consume(kValueOpen.size());
        start_value();
        return true;
      case 1:
        record("stray_arg_key_close", key_);
        consume(kKeyClose.size());
        return true;
      case 2:
      case 3:
      case 4:
        record("missing_arg_value", key_);
        state_ = State::kCallBody;
        return true;
      default:
        if (partial) return false;
    }
  }
  record("missing_arg_value_open", key_);
  start_value();
  return true;
}

void ToolCallParser::start_value() {
  state_ = State::kArgValue;
  scan_ = 0;
  value_types_ = value_skip_ ? 0 : tool_->param_types(key_);
  // Only string-only parameters can stream: any other value's text is converted as a whole.
  value_streaming_ = !value_skip_ && value_types_ == kJsonString;
  if (value_streaming_) {
    emit_key(key_);
    emit_arguments("\"");
  }
}

bool ToolCallParser::step_arg_value() {
  const std::string_view s = rest();
  for (size_t i = scan_; i < s.size(); ++i) {
    if (s[i] != '<') continue;
    bool partial = false;
    const int tag =
        match_tag(s.substr(i), {kValueClose, kKeyClose, kKeyOpen, kCallClose, kCallOpen}, eof_, partial);
    if (tag >= 0) {
      size_t used = i;
      if (tag == 0) {
        used += kValueClose.size();
      } else if (tag == 1) {
        record("stray_arg_key_close", key_);
        used += kKeyClose.size();
      } else {
        record("missing_arg_value_close", key_);
      }
      finish_value(s.substr(0, i));
      consume(used);
      state_ = State::kCallBody;
      return true;
    }
    if (partial) {
      if (value_streaming_) {
        std::string piece;
        append_json_escaped(piece, s.substr(0, i));
        emit_arguments(piece);
        consume(i);
        scan_ = 0;
      } else {
        scan_ = i;
      }
      return false;
    }
  }
  if (eof_) {
    record("missing_arg_value_close", key_);
    finish_value(s);
    consume(s.size());
    state_ = State::kCallBody;
    return true;
  }
  if (value_streaming_) {
    std::string piece;
    append_json_escaped(piece, s);
    emit_arguments(piece);
    consume(s.size());
    scan_ = 0;
  } else {
    scan_ = s.size();
  }
  return false;
}

void ToolCallParser::finish_value(std::string_view text) {
  if (value_skip_) return;
  if (value_streaming_) {
    std::string piece;
    append_json_escaped(piece, text);
    piece += '"';
    emit_arguments(piece);
    return;
  }
  ArgumentValue value = convert_argument(text, value_types_);
  if (value.fit == ArgumentValue::Fit::kCoerced) record("argument_coerced", key_ + "=" + std::string(text));
  if (value.fit == ArgumentValue::Fit::kMismatch)
    record("argument_type_mismatch", key_ + "=" + std::string(text));
  emit_key(key_);
  emit_arguments(dump(value.value));
}

void ToolCallParser::note_whitespace() {
  if (whitespace_noted_ || tool_ == nullptr) return;
  whitespace_noted_ = true;
  record("glm_whitespace", tool_->name);
}

void ToolCallParser::release(size_t n) {
  emit_content(rest().substr(0, n));
  consume(n);
}

void ToolCallParser::emit_content(std::string_view text) {
  out_.content += text;
}

void ToolCallParser::begin_call(const ToolInfo& tool) {
  ToolCallDelta delta;
  delta.index = calls_++;
  delta.id = ids_();
  delta.name = tool.name;
  out_.tool_calls.push_back(std::move(delta));
  tool_ = &tool;
  args_emitted_ = 0;
  args_from_json_ = false;
  whitespace_noted_ = false;
  keys_.clear();
}

void ToolCallParser::emit_arguments(std::string_view piece) {
  const size_t index = calls_ - 1;
  if (out_.tool_calls.empty() || out_.tool_calls.back().index != index) {
    ToolCallDelta delta;
    delta.index = index;
    out_.tool_calls.push_back(std::move(delta));
  }
  out_.tool_calls.back().arguments += piece;
}

void ToolCallParser::emit_key(const std::string& key) {
  std::string piece = args_emitted_++ == 0 ? "{\"" : ",\"";
  append_json_escaped(piece, key);
  piece += "\":";
  emit_arguments(piece);
}

void ToolCallParser::end_call() {
  if (!args_from_json_) emit_arguments(args_emitted_ == 0 ? "{}" : "}");
  tool_ = nullptr;
}

void ToolCallParser::emit_json_call(const JsonCallShape& shape) {
  begin_call(*tools_.find(shape.name));
  emit_arguments(dump(shape.arguments));
  args_from_json_ = true;
}

void ToolCallParser::record(std::string kind, std::string detail) {
  recoveries_.push_back({std::move(kind), std::move(detail)});
}

}  // namespace spark
