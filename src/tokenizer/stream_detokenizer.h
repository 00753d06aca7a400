// Incremental decoding for streamed generation: fed one id at a time, it returns the text that is
// final so far. Output never splits a UTF-8 character and is always valid UTF-8; bytes that cannot
// become valid (a lone continuation byte, a sequence cut short by another character) turn into U+FFFD
// exactly where a whole-sequence Tokenizer::decode would put them, so the concatenated chunks plus
// flush() always equal decode(all ids).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace spark {

class StreamDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit StreamDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Text made final by `id` (possibly empty while a multi-byte character is incomplete). Throws
  // spark::Error for an id that is not in the vocabulary (nothing is consumed then).
  std::string push(int32_t id);
  // Appending form of push().
  void push(int32_t id, std::string& out);

  // Ends the stream: held bytes of an unfinished character become U+FFFD. The object can be reused.
  std::string flush();

  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;  // a proper prefix of a well-formed UTF-8 sequence
};

}  // namespace spark
