// The streaming detokenizer fed one id at a time, as generation feeds it. The first input byte sets
// skip_special_tokens; the rest is a list of 16-bit ids, some outside the vocabulary. What the header
// promises is checked exactly: every chunk is valid UTF-8, at most 3 bytes are ever held back, an invalid id
// is a spark::Error that consumes nothing, and the chunks plus flush() equal decode() of the accepted ids.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "spark/error.h"
#include "tokenizer/stream_detokenizer.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/tokenizer.h"

using spark::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const spark::Tokenizer& tok = spark::fuzz::spark_tokenizer();
  const bool skip_special = data[0] & 1;
  spark::StreamDetokenizer detok(tok, skip_special);
  std::vector<int32_t> accepted;
  std::string streamed;
  for (size_t i = 1; i + 1 < size; i += 2) {
    // Mostly ids near the byte tokens and the specials, where multi-byte characters and skipping happen.
    const int32_t id = static_cast<int16_t>(data[i] | (data[i + 1] << 8));
    const size_t held = detok.pending_bytes();
    try {
      const std::string chunk = detok.push(id);
      check(tok.contains(id), "push accepted an id outside the vocabulary");
      check(spark::fuzz::well_formed_utf8(chunk), "chunk not UTF-8");
      streamed += chunk;
      accepted.push_back(id);
    } catch (const spark::Error&) {
      check(!tok.contains(id), "push rejected a vocabulary id");
      check(detok.pending_bytes() == held, "a rejected id changed the held bytes");
    }
    check(detok.pending_bytes() <= 3, "more than 3 bytes held back");
  }
  const std::string tail = detok.flush();
  check(spark::fuzz::well_formed_utf8(tail), "flush output not UTF-8");
  check(detok.pending_bytes() == 0, "bytes held after flush");
  streamed += tail;
  check(streamed == tok.decode(accepted, skip_special), "streamed text != decode(ids)");
  return 0;
}
