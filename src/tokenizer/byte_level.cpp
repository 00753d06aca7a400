#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace spark::byte_level {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every code point of the alphabet is below U+0144

  Tables() {
    from_cp.fill(-1);
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable[b] ? static_cast<uint32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) {
  return tables().to_cp[b];
}

int code_point_to_byte(uint32_t cp) {
  return cp < 512 ? tables().from_cp[cp] : -1;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8::append(tables().to_cp[b], out);
  return out;
}

bool decode(std::string_view text, std::string& out) {
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const utf8::Step st = utf8::step(p + i, text.size() - i);
    if (st.kind != utf8::StepKind::kValid) return false;
    const int b = code_point_to_byte(utf8::decode(p + i, st.length));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    i += st.length;
  }
  return true;
}

}  // namespace spark::byte_level
