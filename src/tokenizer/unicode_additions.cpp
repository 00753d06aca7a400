#include "tokenizer/unicode_additions.h"

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/utf8.h"

namespace spark {

namespace {

struct ClassAdditions {
  std::string_view name;
  std::string_view body;
};
constexpr ClassAdditions kAdditions[] = {
#include "tokenizer/unicode_additions.inc"
};

// Every code point of every class body, as sorted ranges, plus one bit per 256-code-point page so the
// common case (no page has one) costs a table lookup.
struct NewerCodePoints {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::bitset<0x1100> pages;

  NewerCodePoints() {
    for (const auto& a : kAdditions) {
      const std::string_view b = a.body;
      size_t i = 0;
      auto number = [&]() {  // parses "\x{HEX}" at i
        const size_t open = b.find('{', i), close = b.find('}', i);
        const uint32_t v =
            static_cast<uint32_t>(std::stoul(std::string(b.substr(open + 1, close - open - 1)), nullptr, 16));
        i = close + 1;
        return v;
      };
      while (i < b.size()) {
        const uint32_t lo = number();
        uint32_t hi = lo;
        if (i < b.size() && b[i] == '-') {
          ++i;
          hi = number();
        }
        ranges.emplace_back(lo, hi);
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (const auto& [lo, hi] : ranges) {
      for (uint32_t p = lo >> 8; p <= hi >> 8; ++p) pages.set(p);
    }
  }

  bool contains(uint32_t cp) const {
    if (!pages.test(cp >> 8)) return false;
    auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(cp, UINT32_MAX));
    return it != ranges.begin() && std::prev(it)->second >= cp;
  }
};

const NewerCodePoints& newer() {
  static const NewerCodePoints n;
  return n;
}

}  // namespace

std::string_view unicode_class_additions(std::string_view name) {
  for (const auto& a : kAdditions) {
    if (a.name == name) return a.body;
  }
  return {};
}

bool has_newer_code_points(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const NewerCodePoints& table = newer();
  size_t i = 0;
  while (i < n) {
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const utf8::Step st = utf8::step(p + i, n - i);
    if (st.kind == utf8::StepKind::kValid && st.length >= 3 &&
        table.contains(utf8::decode(p + i, st.length))) {
      return true;
    }
    i += st.length;
  }
  return false;
}

}  // namespace spark
