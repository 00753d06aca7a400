#include "tokenizer/stream_detokenizer.h"

#include "tokenizer/utf8.h"

namespace spark {

StreamDetokenizer::StreamDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDetokenizer::push(int32_t id) {
  std::string out;
  push(id, out);
  return out;
}

void StreamDetokenizer::push(int32_t id, std::string& out) {
  const std::string_view bytes = tokenizer_->token_bytes(id);  // throws before any state changes
  if (skip_special_ && tokenizer_->is_special(id)) return;
  // Work on held bytes + new bytes; everything up to an incomplete tail is final.
  std::string buf;
  std::string_view data = bytes;
  if (!pending_.empty()) {
    buf = pending_;
    buf.append(bytes);
    data = buf;
    pending_.clear();
  }
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t i = 0, run = 0;
  while (i < data.size()) {
    const utf8::Step st = utf8::step(p + i, data.size() - i);
    if (st.kind == utf8::StepKind::kValid) {
      i += st.length;
      continue;
    }
    out.append(data.data() + run, i - run);
    if (st.kind == utf8::StepKind::kIncomplete) {
      // The next token may complete it (step() only says incomplete at the very end).
      pending_.assign(data.substr(i));
      return;
    }
    out.append(utf8::kReplacement);
    i += st.length;
    run = i;
  }
  out.append(data.data() + run, data.size() - run);
}

std::string StreamDetokenizer::flush() {
  std::string out;
  if (!pending_.empty()) out.append(utf8::kReplacement);  // a truncated sequence is one maximal subpart
  pending_.clear();
  return out;
}

}  // namespace spark
