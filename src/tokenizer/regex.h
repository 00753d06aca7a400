// A compiled PCRE2 pattern (UTF + UCP, JIT when available) used by the pre-tokenizer. Matching is
// thread-safe: per-thread match data and JIT stacks live in thread_local storage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace spark {

// Which Unicode tables a match needs. kNewer matches like the reference on any text; kSystem gives the
// same matches, faster, on text where has_newer_code_points() is false.
enum class UnicodeTables { kSystem, kNewer };

struct Span {
  uint32_t begin;
  uint32_t end;
};

class Regex {
 public:
  // Throws spark::Error naming the pattern and PCRE2's message when the pattern does not compile.
  explicit Regex(std::string_view pattern, bool literal = false);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every match in `subject` (valid UTF-8; nothing outside it is visible to lookarounds),
  // left to right and non-overlapping. An empty match that starts where the previous match ended is
  // skipped, as Rust's regex iterators (and so Hugging Face tokenizers) do.
  void find_all(std::string_view subject, std::vector<Span>& out,
                UnicodeTables tables = UnicodeTables::kNewer) const;

  // First match at or after `start`; false when there is none.
  bool search(std::string_view subject, size_t start, Span& match,
              UnicodeTables tables = UnicodeTables::kNewer) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled {
    Compiled(const std::string& source, const std::string& pattern);
    ~Compiled();
    Compiled(const Compiled&) = delete;
    Compiled& operator=(const Compiled&) = delete;
    pcre2_real_code_8* code = nullptr;
    bool jit = false;
  };
  std::unique_ptr<Compiled> system_;  // the pattern in PCRE2 syntax, Unicode as the system knows it
  std::unique_ptr<Compiled> newer_;   // with classes widened to newer Unicode; null when nothing widens
  std::string pattern_;
};

}  // namespace spark
