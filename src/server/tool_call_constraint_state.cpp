#include "server/tool_call_constraint_state.h"

#include <string_view>

#include "server/tool_call_parser_tools.h"

namespace spark {

namespace {

enum Literal : uint8_t {
  kLitOpen,
  kLitKeyOpen,
  kLitCallClose,
  kLitKeyClose,
  kLitValueClose,
  kLitTrue,
  kLitFalse,
  kLitNull,
};
constexpr std::string_view kLiteralText[] = {
    "<tool_call>",  "<arg_key>", "</tool_call>", "</arg_key><arg_value>",
    "</arg_value>", "true",      "false",        "null",
};

enum Number : uint8_t {
  kNumStart,
  kNumMinus,
  kNumZero,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumExp,
  kNumExpSign,
  kNumExpDigits,
};
// Bounds keep every number finite as a double and every generation finite in length.
constexpr uint8_t kMaxIntDigits = 15;
constexpr uint8_t kMaxFracDigits = 15;
constexpr uint8_t kMaxExpDigits = 2;

bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}

}  // namespace

bool ConstraintState::advance(const ConstraintGrammar& g, uint8_t c) {
  const TriePool& tries = g.tries();
  switch (phase) {
    case kLiteral: {
      const std::string_view text = kLiteralText[lit];
      if (c != static_cast<uint8_t>(text[lit_pos])) return false;
      if (++lit_pos < text.size()) return true;
      switch (lit) {
        case kLitOpen:
          phase = kName;
          trie = g.names();
          break;
        case kLitKeyOpen:
          phase = kKey;
          trie = static_cast<uint32_t>(g.node(g.tool(tool).params).keys_raw);
          break;
        case kLitCallClose:
          phase = kDone;
          break;
        case kLitKeyClose:
          start_top_value(g);
          break;
        case kLitValueClose:
          phase = kSeparator;
          break;
        default:  // true, false, null
          value_done();
      }
      return true;
    }
    case kName: {
      if (c == '<' && tries.terminal(trie) >= 0) {
        tool = static_cast<uint32_t>(tries.terminal(trie));
        used = 0;
        phase = kSeparatorLt;
        return true;
      }
      const int32_t child = tries.child(trie, c);
      if (child < 0) return false;
      trie = static_cast<uint32_t>(child);
      return true;
    }
    case kSeparator:
      if (c != '<') return false;
      phase = kSeparatorLt;
      return true;
    case kSeparatorLt: {
      const SchemaNode& params = g.node(g.tool(tool).params);
      if (c == 'a' && (params.all_props & ~used) != 0) {
        begin_literal(kLitKeyOpen, 2);
        return true;
      }
      if (c == '/' && (params.required & ~used) == 0) {
        begin_literal(kLitCallClose, 2);
        return true;
      }
      return false;
    }
    case kKey: {
      const SchemaNode& params = g.node(g.tool(tool).params);
      if (c == '<') {
        const int32_t t = tries.terminal(trie);
        if (t < 0 || ((used >> t) & 1)) return false;
        used |= uint64_t{1} << t;
        node = params.props[t];
        begin_literal(kLitKeyClose, 1);
        return true;
      }
      const int32_t child = tries.child(trie, c);
      if (child < 0 || (tries.subtree(child) & ~used) == 0) return false;
      trie = static_cast<uint32_t>(child);
      return true;
    }
    case kRawString:
      if (c == '<' && u8_need == 0) {
        begin_literal(kLitValueClose, 1);
        return true;
      }
      return string_byte(g, c, false);
    case kRawEnum: {
      if (c == '<' && tries.terminal(trie) >= 0) {
        begin_literal(kLitValueClose, 1);
        return true;
      }
      const int32_t child = tries.child(trie, c);
      if (child < 0) return false;
      trie = static_cast<uint32_t>(child);
      return true;
    }
    case kValueEnd:
      if (c != '<') return false;
      begin_literal(kLitValueClose, 1);
      return true;
    case kValueStart:
      return start_json_value(g, c);
    case kStringBody:
      if (c == '"' && !escape && u8_need == 0) {
        value_done();
        return true;
      }
      return string_byte(g, c, true);
    case kFreeKeyBody:
      if (c == '"' && !escape && u8_need == 0) {
        node = 0;  // free keys take free values
        phase = kObjectColon;
        return true;
      }
      return string_byte(g, c, true);
    case kEnumValue: {
      const int32_t child = tries.child(trie, c);
      if (child >= 0) {
        trie = static_cast<uint32_t>(child);
        if (tries.terminal(trie) >= 0 && !tries.has_children(trie)) value_done();
        return true;
      }
      if (tries.terminal(trie) < 0) return false;
      value_done();  // a value that could also have gone on (1 of 1 and 10): c belongs to what follows
      return advance(g, c);
    }
    case kNumberBody:
      return number_byte(g, c);
    case kObjectStart: {
      const Frame& f = frames[depth - 1];
      const SchemaNode& n = g.node(f.node);
      if (c == '}') {
        if (!n.free_keys && (n.required & ~f.used) != 0) return false;
        --depth;
        value_done();
        return true;
      }
      return object_key_start(g, c);
    }
    case kObjectNext:
      if (c == ' ' && space_ok) {
        space_ok = false;
        return true;
      }
      space_ok = false;
      return object_key_start(g, c);
    case kObjectKey: {
      Frame& f = frames[depth - 1];
      const int32_t child = tries.child(trie, c);
      if (child < 0 || (tries.subtree(child) & ~f.used) == 0) return false;
      trie = static_cast<uint32_t>(child);
      const int32_t t = tries.terminal(trie);
      if (t >= 0) {  // keys are quoted, so a complete key is a leaf
        f.used |= uint64_t{1} << t;
        node = g.node(f.node).props[t];
        phase = kObjectColon;
      }
      return true;
    }
    case kObjectColon:
      if (c != ':') return false;
      phase = kValueStart;
      space_ok = true;
      return true;
    case kObjectAfter: {
      const Frame& f = frames[depth - 1];
      const SchemaNode& n = g.node(f.node);
      if (c == ',') {
        const bool more = n.free_keys ? f.count < g.options().max_free_members : (n.all_props & ~f.used) != 0;
        if (!more) return false;
        phase = kObjectNext;
        space_ok = true;
        return true;
      }
      if (c == '}') {
        if (!n.free_keys && (n.required & ~f.used) != 0) return false;
        --depth;
        value_done();
        return true;
      }
      return false;
    }
    case kArrayStart: {
      const SchemaNode& n = g.node(frames[depth - 1].node);
      if (c == ']') {
        if (n.min_items > 0) return false;
        --depth;
        value_done();
        return true;
      }
      node = n.items;
      phase = kValueStart;
      space_ok = false;
      return start_json_value(g, c);
    }
    case kArrayAfter: {
      const Frame& f = frames[depth - 1];
      const SchemaNode& n = g.node(f.node);
      if (c == ',' && f.count < n.max_items) {
        node = n.items;
        phase = kValueStart;
        space_ok = true;
        return true;
      }
      if (c == ']' && f.count >= n.min_items) {
        --depth;
        value_done();
        return true;
      }
      return false;
    }
    case kDone:
      return false;
  }
  return false;
}

bool ConstraintState::start_json_value(const ConstraintGrammar& g, uint8_t c) {
  const SchemaNode& n = g.node(node);
  if (c == ' ' && space_ok) {
    space_ok = false;
    return true;
  }
  space_ok = false;
  if (n.enum_json >= 0) {
    const TriePool& tries = g.tries();
    const int32_t child = tries.child(static_cast<uint32_t>(n.enum_json), c);
    if (child < 0) return false;
    trie = static_cast<uint32_t>(child);
    phase = kEnumValue;
    if (tries.terminal(trie) >= 0 && !tries.has_children(trie)) value_done();
    return true;
  }
  const bool container_ok =
      depth < ConstraintGrammar::kMaxDepth && (!n.free || depth < g.options().max_free_depth);
  switch (c) {
    case '"':
      if (!(n.types & kJsonString)) return false;
      phase = kStringBody;
      begin_string();
      return true;
    case 't':
    case 'f':
      if (!(n.types & kJsonBoolean)) return false;
      begin_literal(c == 't' ? kLitTrue : kLitFalse, 1);
      return true;
    case 'n':
      if (!(n.types & kJsonNull)) return false;
      begin_literal(kLitNull, 1);
      return true;
    case '{':
    case '[': {
      const bool array = c == '[';
      if (!(n.types & (array ? kJsonArray : kJsonObject)) || !container_ok) return false;
      frames[depth++] = Frame{node, static_cast<uint8_t>(array), 0, 0};
      phase = array ? kArrayStart : kObjectStart;
      return true;
    }
    default:
      if ((c == '-' || is_digit(c)) && (n.types & (kJsonInteger | kJsonNumber))) {
        phase = kNumberBody;
        num = kNumStart;
        digits = 0;
        return number_byte(g, c);
      }
      return false;
  }
}

bool ConstraintState::number_byte(const ConstraintGrammar& g, uint8_t c) {
  const bool fraction_ok = (g.node(node).types & kJsonNumber) != 0;
  const bool exp = c == 'e' || c == 'E';
  switch (num) {
    case kNumStart:
    case kNumMinus:
      if (c == '-' && num == kNumStart) {
        num = kNumMinus;
        return true;
      }
      if (!is_digit(c)) return false;
      num = c == '0' ? kNumZero : kNumInt;
      digits = 1;
      return true;
    case kNumZero:
    case kNumInt:
      if (num == kNumInt && is_digit(c) && digits < kMaxIntDigits) {
        ++digits;
        return true;
      }
      if (fraction_ok && c == '.') {
        num = kNumDot;
        return true;
      }
      if (fraction_ok && exp) {
        num = kNumExp;
        return true;
      }
      break;
    case kNumDot:
      if (!is_digit(c)) return false;
      num = kNumFrac;
      digits = 1;
      return true;
    case kNumFrac:
      if (is_digit(c) && digits < kMaxFracDigits) {
        ++digits;
        return true;
      }
      if (exp) {
        num = kNumExp;
        return true;
      }
      break;
    case kNumExp:
    case kNumExpSign:
      if ((c == '+' || c == '-') && num == kNumExp) {
        num = kNumExpSign;
        return true;
      }
      if (!is_digit(c)) return false;
      num = kNumExpDigits;
      digits = 1;
      return true;
    case kNumExpDigits:
      if (is_digit(c) && digits < kMaxExpDigits) {
        ++digits;
        return true;
      }
      break;
    default:
      return false;
  }
  // The number is complete; c is the first byte of whatever follows it.
  value_done();
  return advance(g, c);
}

bool ConstraintState::object_key_start(const ConstraintGrammar& g, uint8_t c) {
  if (c != '"') return false;
  const Frame& f = frames[depth - 1];
  const SchemaNode& n = g.node(f.node);
  if (n.free_keys) {
    phase = kFreeKeyBody;
    begin_string();
    return true;
  }
  if ((n.all_props & ~f.used) == 0) return false;
  const int32_t child = g.tries().child(static_cast<uint32_t>(n.keys_json), c);
  if (child < 0) return false;
  trie = static_cast<uint32_t>(child);
  phase = kObjectKey;
  return true;
}

bool ConstraintState::string_byte(const ConstraintGrammar& g, uint8_t c, bool json) {
  if (escape) {
    if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't')
      return false;
    escape = false;  // \u escapes are left out: a lone surrogate would make the JSON invalid
    ++str_len;
    return true;
  }
  if (u8_need > 0) {
    if (c < u8_lo || c > u8_hi) return false;
    --u8_need;
    u8_lo = 0x80;
    u8_hi = 0xBF;
    ++str_len;
    return true;
  }
  if (str_len >= g.options().max_string_bytes) return false;  // no new character: the string must end
  if (c < 0x80) {
    if (c == '<') return false;
    if (json && (c < 0x20 || c == '"')) return false;
    if (json && c == '\\') escape = true;
    ++str_len;
    return true;
  }
  // Well-formed UTF-8 only (no overlongs, surrogates or code points past U+10FFFF), as JSON parsers demand.
  if (c >= 0xC2 && c <= 0xDF) {
    u8_need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    u8_need = 2;
    if (c == 0xE0) u8_lo = 0xA0;
    if (c == 0xED) u8_hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    u8_need = 3;
    if (c == 0xF0) u8_lo = 0x90;
    if (c == 0xF4) u8_hi = 0x8F;
  } else {
    return false;
  }
  ++str_len;
  return true;
}

void ConstraintState::start_top_value(const ConstraintGrammar& g) {
  const SchemaNode& n = g.node(node);
  if (n.enum_raw >= 0) {
    phase = kRawEnum;
    trie = static_cast<uint32_t>(n.enum_raw);
  } else if (n.free || (n.types & kJsonString)) {
    // The parser keeps such text as a string unless it is JSON of another declared type: both are valid.
    phase = kRawString;
    begin_string();
  } else {
    phase = kValueStart;
    space_ok = false;
  }
}

void ConstraintState::value_done() {
  if (depth == 0) {
    phase = kValueEnd;
    return;
  }
  Frame& f = frames[depth - 1];
  if (f.count < 255) ++f.count;
  phase = f.is_array ? kArrayAfter : kObjectAfter;
}

}  // namespace spark
