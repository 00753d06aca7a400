// The character-level automaton behind ToolCallConstraint: where generation stands inside
// `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>` for the compiled grammar.
// It is a plain value (no heap), copied at every node of the token-trie walk, so it is kept small.
#pragma once

#include <cstdint>

#include "server/tool_call_constraint_grammar.h"

namespace spark {

struct ConstraintState {
  enum Phase : uint8_t {
    kLiteral,      // matching a fixed text (lit, lit_pos)
    kName,         // tool name (trie)
    kSeparator,    // after the name or a value: `<arg_key>` or `</tool_call>`
    kSeparatorLt,  // ... after its `<`
    kKey,          // parameter name (trie)
    kRawString,    // `<arg_value>` text of a string parameter
    kRawEnum,      // `<arg_value>` text of an enum parameter (trie)
    kValueEnd,     // a JSON `<arg_value>` is complete: `</arg_value>` must follow
    kValueStart,   // a JSON value starts (for `node`)
    kStringBody,   // inside a JSON string value
    kFreeKeyBody,  // inside a free object key
    kEnumValue,    // a JSON enum value (trie)
    kNumberBody,
    kObjectStart,  // after `{`
    kObjectKey,    // a declared key (trie, quotes included)
    kObjectColon,
    kObjectAfter,  // after a member: `,` or `}`
    kObjectNext,   // after `,`: a key
    kArrayStart,   // after `[`
    kArrayAfter,   // after an item: `,` or `]`
    kDone,         // `</tool_call>` written: only end of sequence remains
  };

  struct Frame {
    uint32_t node;
    uint8_t is_array;
    uint8_t count;
    uint64_t used;
  };

  Phase phase = kLiteral;
  uint8_t lit = 0;  // Literal being matched
  uint8_t lit_pos = 0;
  uint8_t depth = 0;     // open JSON containers
  uint8_t u8_need = 0;   // UTF-8 continuation bytes still due in a string
  uint8_t u8_lo = 0x80;  // range of the next continuation byte
  uint8_t u8_hi = 0xBF;
  uint8_t num = 0;        // number sub-state
  uint8_t digits = 0;     // digits in the current part of a number
  bool space_ok = false;  // one space may follow `:` or `,`
  bool escape = false;    // after a backslash in a JSON string
  uint16_t str_len = 0;   // bytes in the current string
  uint32_t trie = 0;      // node in the trie being walked
  uint32_t tool = 0;
  uint32_t node = 0;  // schema node of the value being written
  uint64_t used = 0;  // the tool's parameters already written
  Frame frames[ConstraintGrammar::kMaxDepth];

  // Consumes one byte; false when it cannot continue a valid call (the state is then meaningless).
  bool advance(const ConstraintGrammar& g, uint8_t c);

  // In a string, at a character boundary: every byte that forms whole characters without `<` (and, in JSON,
  // without `"`, `\` or control bytes) only lengthens the string. The mask computation relies on this.
  bool in_raw_text() const { return phase == kRawString && u8_need == 0; }
  bool in_json_text() const {
    return (phase == kStringBody || phase == kFreeKeyBody) && u8_need == 0 && !escape;
  }

 private:
  bool start_json_value(const ConstraintGrammar& g, uint8_t c);
  bool string_byte(const ConstraintGrammar& g, uint8_t c, bool json);
  bool number_byte(const ConstraintGrammar& g, uint8_t c);
  bool object_key_start(const ConstraintGrammar& g, uint8_t c);
  void start_top_value(const ConstraintGrammar& g);
  void value_done();
  void begin_literal(uint8_t which, uint8_t pos) {
    phase = kLiteral;
    lit = which;
    lit_pos = pos;
  }
  void begin_string() {
    str_len = 0;
    u8_need = 0;
    escape = false;
  }
};

}  // namespace spark
