// The reasoning parser over model output. The first input byte sets the thinking flag and where the text is
// cut; the rest is the generated text. Whole, two-chunk and byte-by-byte runs must agree exactly (reasoning,
// content, reasoning_closed, recoveries), and no byte may be lost other than the `<think>` / `</think>` tags
// the parser consumes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "server/reasoning_parser.h"

using spark::fuzz::check;

namespace {

struct Run {
  std::string reasoning, content;
  bool closed = false;
  std::vector<spark::ParseRecovery> recoveries;
};

Run run(bool thinking, const std::vector<std::string_view>& chunks) {
  spark::ReasoningParser parser(thinking);
  Run r;
  for (std::string_view chunk : chunks) {
    const spark::ReasoningDelta d = parser.feed(chunk);
    r.reasoning += d.reasoning;
    r.content += d.content;
  }
  r.closed = parser.reasoning_closed();
  const spark::ReasoningDelta d = parser.finish();
  r.reasoning += d.reasoning;
  r.content += d.content;
  r.recoveries = parser.recoveries();
  check(!r.closed || thinking, "reasoning closed with thinking off");
  if (!thinking) check(r.reasoning.empty(), "reasoning with thinking off");
  return r;
}

void check_same(const Run& a, const Run& b, const char* how) {
  check(a.reasoning == b.reasoning, "reasoning differs", how);
  check(a.content == b.content, "content differs", how);
  check(a.closed == b.closed, "reasoning_closed differs", how);
  check(a.recoveries == b.recoveries, "recoveries differ", how);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool thinking = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Run whole = run(thinking, {text});
  // Only tags are consumed: the output is the input less some `<think>`/`</think>` occurrences.
  check(whole.reasoning.size() + whole.content.size() <= text.size(), "output longer than the input");
  const size_t cut = text.empty() ? 0 : (data[0] >> 1) % (text.size() + 1);
  check_same(whole, run(thinking, {text.substr(0, cut), text.substr(cut)}), "two chunks");
  if (text.size() <= 4096) {
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    check_same(whole, run(thinking, bytes), "byte by byte");
  }
  return 0;
}
