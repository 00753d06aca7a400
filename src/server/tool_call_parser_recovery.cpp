// The parts of ToolCallParser that recover calls written in other syntaxes: `[name]{...}`, bare JSON objects,
// and JSON inside `<tool_call>`. They follow a JSON object until its brackets close (or a call tag or the end
// of output cuts it off) and only then decide whether it is a call.
#include <string>

#include "server/tool_call_parser.h"
#include "server/tool_call_parser_syntax.h"
#include "util/bounded_json.h"

namespace spark {

namespace {

constexpr size_t kMaxBracketName = 64;       // OpenAI's own limit on function names
constexpr size_t kMaxBracketGap = 16;        // whitespace allowed between `[name]` and `{`
constexpr size_t kMaxJsonCapture = 1 << 16;  // a JSON object held back longer than this is released

// The first keys of a JSON object that may be a call; any other first key means the object is data.
bool is_call_key(std::string_view key) {
  for (std::string_view k :
       {"name", "tool", "tool_name", "function", "type", "id", "arguments", "parameters"}) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

using tool_syntax::dump;
using tool_syntax::is_name_char;
using tool_syntax::is_space;
using tool_syntax::kCallClose;
using tool_syntax::kCallOpen;
using tool_syntax::match_tag;

bool ToolCallParser::step_bracket() {
  const std::string_view s = rest();
  size_t i = scan_;
  while (i < s.size() && is_name_char(s[i]) && i <= kMaxBracketName) ++i;
  scan_ = i;
  if (i > kMaxBracketName) {
    release(1);  // too long for a name: the `[` is text, and what follows is scanned as text
    state_ = State::kText;
    return true;
  }
  if (i == s.size()) {
    if (!eof_) return false;
    release(i);
    state_ = State::kText;
    return true;
  }
  if (s[i] != ']' || i == 1) {
    release(1);
    state_ = State::kText;
    return true;
  }
  size_t j = i + 1;
  while (j < s.size() && is_space(s[j]) && j - i <= kMaxBracketGap) ++j;
  if (j == s.size() && !eof_) return false;
  if (j == s.size() || s[j] != '{') {
    release(j);
    state_ = State::kText;
    return true;
  }
  const std::string_view name = s.substr(1, i - 1);
  if (tools_.find(name) == nullptr) {
    // `[name]{` is a call attempt, but not of an offered tool: it stays text (the object may still name one).
    record("unknown_tool", std::string(name));
    release(j);
    state_ = State::kText;
    return true;
  }
  bracket_name_ = name;
  start_json(JsonMode::kBracket, j);
  return true;
}

void ToolCallParser::start_json(JsonMode mode, size_t at) {
  json_mode_ = mode;
  json_at_ = at;
  scanner_ = JsonScanner();
  scan_ = at;
  state_ = State::kJson;
}

bool ToolCallParser::step_json() {
  const std::string_view s = rest();
  const bool committed = json_mode_ == JsonMode::kArguments;
  for (size_t i = scan_; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' && !scanner_.in_string()) {
      // A call tag cannot be inside a JSON object: the object ended there, unclosed.
      bool partial = false;
      if (match_tag(s.substr(i), {kCallOpen, kCallClose}, eof_, partial) >= 0) return finish_json(i, false);
      if (partial) {
        scan_ = i;
        return false;
      }
    }
    if (scanner_.feed(c)) return finish_json(i + 1, true);
    if (json_mode_ == JsonMode::kBare) {
      if (scanner_.first_key_state() == JsonScanner::FirstKey::kNone) {
        release(1);  // `{` followed by something other than a key: plain text
        state_ = State::kText;
        return true;
      }
      if (scanner_.first_key_state() == JsonScanner::FirstKey::kKey && !is_call_key(scanner_.first_key())) {
        release(i + 1);  // an object of data, not a call: content until it closes
        state_ = State::kPassthroughJson;
        return true;
      }
    }
    if (i - json_at_ >= kMaxJsonCapture) {
      if (committed) return finish_json(i + 1, false);
      release(i + 1);
      state_ = State::kPassthroughJson;
      return true;
    }
  }
  scan_ = s.size();
  if (eof_) return finish_json(s.size(), false);
  return false;
}

bool ToolCallParser::finish_json(size_t end, bool closed) {
  const std::string_view s = rest();
  const std::string_view text = s.substr(json_at_, end - json_at_);
  nlohmann::ordered_json value;
  std::string repair_note;
  if (closed) {
    value = parse_json_bounded_or_discarded<nlohmann::ordered_json>(text);
  } else if (auto repaired = repair_truncated_json(text)) {
    value = std::move(repaired->value);
    end = json_at_ + repaired->used;
    repair_note = "closed with '" + repaired->appended + "'";
  } else {
    value = nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  }
  auto note_repair = [&] {
    if (!repair_note.empty()) record("repaired_json", repair_note);
  };

  if (json_mode_ == JsonMode::kArguments) {
    if (value.is_object()) {
      note_repair();
      emit_arguments(dump(value));
      args_from_json_ = true;
    } else {
      record("unparsable_arguments", std::string(text));
    }
    consume(end);
    state_ = State::kCallBody;
    return true;
  }

  JsonCallShape shape = interpret_call_object(value, tools_);
  if (json_mode_ == JsonMode::kBare && !shape.has_arguments) {
    shape.kind = JsonCallShape::Kind::kNone;  // {"name": "Ann", "age": 3} in prose is data, not a call
  }
  if (json_mode_ == JsonMode::kBracket && shape.kind != JsonCallShape::Kind::kCall && value.is_object()) {
    shape.kind = JsonCallShape::Kind::kCall;  // `[name]` then the arguments themselves
    shape.name = bracket_name_;
    shape.arguments = value;
  }
  if (shape.kind == JsonCallShape::Kind::kCall) {
    note_repair();
    switch (json_mode_) {
      case JsonMode::kBare:
        record("bare_json_call", shape.name);
        break;
      case JsonMode::kBracket:
        record("bracketed_call", shape.name);
        break;
      default:
        record("json_in_tool_call", shape.name);
    }
    consume(end);
    emit_json_call(shape);
    if (json_mode_ == JsonMode::kInCall) {
      state_ = State::kCallBody;  // expects `</tool_call>`
    } else {
      end_call();
      state_ = State::kAfterCall;
    }
    return true;
  }

  if (shape.kind == JsonCallShape::Kind::kUnknownTool) {
    record("unknown_tool", shape.name);
  } else if (json_mode_ != JsonMode::kBare) {
    record("unparsable_tool_call", std::string(s.substr(0, end)));
  }
  if (json_mode_ == JsonMode::kInCall) {
    release(end);
    state_ = State::kUnknownCall;
  } else {
    release(end);  // text; whatever follows (a tag that cut the object off, say) is looked at again as text
    state_ = State::kText;
  }
  return true;
}

bool ToolCallParser::step_passthrough_json() {
  const std::string_view s = rest();
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' && !scanner_.in_string()) {
      bool partial = false;
      if (match_tag(s.substr(i), {kCallOpen}, eof_, partial) == 0) {
        release(i);
        state_ = State::kText;
        return true;
      }
      if (partial) {
        release(i);
        return false;
      }
    }
    if (scanner_.feed(c)) {
      release(i + 1);
      state_ = State::kText;
      return true;
    }
  }
  release(s.size());
  return false;
}

}  // namespace spark
