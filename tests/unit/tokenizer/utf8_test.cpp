#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"

namespace spark {
namespace {

std::string lossy(std::string_view s) {
  std::string out;
  utf8::append_lossy(s, out);
  return out;
}

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, ValidSequencesOfEveryLength) {
  EXPECT_EQ(utf8::find_invalid("plain ascii"), std::string_view::npos);
  EXPECT_EQ(utf8::find_invalid("\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80"), std::string_view::npos);  // é 你 😀
  EXPECT_EQ(utf8::find_invalid("\xF4\x8F\xBF\xBF"), std::string_view::npos);                      // U+10FFFF
  EXPECT_EQ(utf8::find_invalid(std::string_view("\x00", 1)), std::string_view::npos);
}

TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_EQ(utf8::find_invalid("abcdefgh\x80"), 8u);  // past the 8-byte ASCII fast path
  EXPECT_EQ(utf8::find_invalid("ab\xC3"), 2u);        // truncated at the end
  EXPECT_EQ(utf8::find_invalid("\xED\xA0\x80"), 0u);  // surrogate
  EXPECT_EQ(utf8::find_invalid("\xC0\xAF"), 0u);      // overlong
  EXPECT_EQ(utf8::find_invalid("\xF5\x80\x80\x80"), 0u);
}

TEST(Utf8, StepClassifiesMaximalSubparts) {
  auto step = [](std::string_view s) {
    return utf8::step(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  EXPECT_EQ(step("\xE4\xB8").kind, utf8::StepKind::kIncomplete);
  EXPECT_EQ(step("\xE4\xB8").length, 2u);
  EXPECT_EQ(step("\xE4\xB8"
                 "a")
                .kind,
            utf8::StepKind::kInvalid);
  EXPECT_EQ(step("\xE4\xB8"
                 "a")
                .length,
            2u);
  EXPECT_EQ(step("\xF0\x9F\x98").kind, utf8::StepKind::kIncomplete);
  EXPECT_EQ(step("\xE0\x80").kind, utf8::StepKind::kInvalid);  // E0 needs A0..BF next
  EXPECT_EQ(step("\xE0\x80").length, 1u);
  EXPECT_EQ(step("\xF4\x90").length, 1u);  // beyond U+10FFFF
  EXPECT_EQ(step("\x80").length, 1u);
}

// The expectations follow Unicode's "maximal subpart" practice, which Rust's from_utf8_lossy (used by
// Hugging Face's decoders) implements.
TEST(Utf8, LossyReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(lossy("a\x80"
                  "b"),
            "a" + R + "b");
  EXPECT_EQ(lossy("\x80\x80"), R + R);
  EXPECT_EQ(lossy("\xE4\xB8"
                  "a"),
            R + "a");                   // truncated 3-byte sequence
  EXPECT_EQ(lossy("\xF0\x9F\x98"), R);  // truncated at the end
  EXPECT_EQ(lossy("\xF0\x9F\x98\xF0\x9F\x98\x80"), R + "\xF0\x9F\x98\x80");
  EXPECT_EQ(lossy("\xC0\xAF"), R + R);          // overlong: C0 is never valid
  EXPECT_EQ(lossy("\xED\xA0\x80"), R + R + R);  // surrogate: ED then two lone continuations
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), R + R + R + R);
  EXPECT_EQ(lossy("\xFF\xFE"), R + R);
  EXPECT_EQ(lossy("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"), R + R + R + R + "A");  // Unicode's example
  EXPECT_EQ(lossy("caf\xC3\xA9"), "caf\xC3\xA9");
}

TEST(Utf8, AppendEncodesEveryLength) {
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x4F60u, 0x1F600u, 0x10FFFFu}) utf8::append(cp, s);
  EXPECT_EQ(s, "A\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF");
  size_t i = 0;
  std::vector<uint32_t> back;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    const auto st = utf8::step(p + i, s.size() - i);
    ASSERT_EQ(st.kind, utf8::StepKind::kValid);
    back.push_back(utf8::decode(p + i, st.length));
    i += st.length;
  }
  EXPECT_EQ(back, (std::vector<uint32_t>{0x41, 0xE9, 0x4F60, 0x1F600, 0x10FFFF}));
}

TEST(ByteLevel, AlphabetIsGpt2s) {
  EXPECT_EQ(byte_level::byte_to_code_point('A'), uint32_t('A'));
  EXPECT_EQ(byte_level::byte_to_code_point(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_level::byte_to_code_point('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_level::byte_to_code_point(0xAD), 0x143u);  // the last unprintable byte
  std::vector<bool> seen(512, false);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_level::byte_to_code_point(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 512u);
    EXPECT_FALSE(seen[cp]) << "code point used twice: " << cp;
    seen[cp] = true;
    EXPECT_EQ(byte_level::code_point_to_byte(cp), b);
  }
  EXPECT_EQ(byte_level::code_point_to_byte(0x4F60), -1);
}

TEST(ByteLevel, EncodeDecodeRoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(byte_level::decode(byte_level::encode(all), back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(byte_level::encode(" the"), "\xC4\xA0the");
  EXPECT_FALSE(byte_level::decode("<\xEF\xBD\x9C>", back));  // fullwidth bar is not in the alphabet
  EXPECT_FALSE(byte_level::decode("\xC4", back));            // not UTF-8
}

}  // namespace
}  // namespace spark
