#include "tokenizer/stream_detokenizer.h"

#include <gtest/gtest.h>

#include "spark/error.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace spark {
namespace {

const std::string R = "\xEF\xBF\xBD";

// Byte strings whose every substring is a token, so any way of cutting them into tokens can be fed.
const std::vector<std::string> kSamples = {
    "a\xC3\xA9"
    "b",                                             // é: 2 bytes
    "\xE4\xBD\xA0\xE5\xA5\xBD",                      // 你好: 3 + 3
    "\xF0\x9F\x98\x80!",                             // 😀!: 4 bytes
    "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB",  // 👩‍💻: emoji, ZWJ, emoji
    "x\x80y",                                        // lone continuation byte
    "\xE4\xB8"
    "a",                     // truncated 3-byte sequence, then ASCII
    "\xF0\x9F\x98",          // truncated at the very end
    "\xC0\xAF\xED\xA0\x80",  // overlong, surrogate
    "\xF4\x90\x80\x80\xFF",  // above U+10FFFF, never-valid byte
    "\xE4\xB8\xE4\xB8\xAD",  // truncated, then the same character complete
};

class StreamDetokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> extra;
    for (const auto& s : kSamples) {
      for (size_t i = 0; i < s.size(); ++i) {
        for (size_t j = i + 2; j <= s.size(); ++j) extra.push_back(s.substr(i, j - i));
      }
    }
    tok_ = new Tokenizer(Tokenizer::from_json(
        test::make_tokenizer_json({}, {{"<s>", true}, {"<t>", false}}, nullptr, extra).dump()));
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static int32_t id_of(const std::string& bytes) { return *tok_->token_to_id(byte_level::encode(bytes)); }

  static Tokenizer* tok_;
};

Tokenizer* StreamDetokenizerTest::tok_ = nullptr;

std::string lossy(const std::string& s) {
  std::string out;
  utf8::append_lossy(s, out);
  return out;
}

// Every way to cut each sample into tokens (2^(n-1) of them): each chunk valid UTF-8, nothing
// emitted before it is final, and the whole equal to decoding all ids at once.
TEST_F(StreamDetokenizerTest, EveryCutOfEverySample) {
  for (const auto& s : kSamples) {
    const size_t cuts = s.size() - 1;
    for (uint32_t mask = 0; mask < (1u << cuts); ++mask) {
      std::vector<int32_t> ids;
      size_t start = 0;
      for (size_t i = 1; i <= s.size(); ++i) {
        if (i == s.size() || (mask >> (i - 1) & 1)) {
          ids.push_back(id_of(s.substr(start, i - start)));
          start = i;
        }
      }
      StreamDetokenizer d(*tok_);
      std::string streamed;
      size_t fed = 0;
      for (int32_t id : ids) {
        const std::string chunk = d.push(id);
        ASSERT_EQ(utf8::find_invalid(chunk), std::string::npos) << "invalid UTF-8 chunk";
        streamed += chunk;
        fed += tok_->token_bytes(id).size();
        // What is out so far is final: the lossy decoding of the bytes fed, minus a held-back tail.
        const std::string whole = lossy(s.substr(0, fed));
        ASSERT_LE(d.pending_bytes(), 3u);
        ASSERT_EQ(whole.substr(0, streamed.size()), streamed);
        ASSERT_EQ(streamed + (d.pending_bytes() ? R : ""), whole);
      }
      streamed += d.flush();
      EXPECT_EQ(streamed, tok_->decode(ids)) << "sample " << testing::PrintToString(s) << " mask " << mask;
      EXPECT_EQ(streamed, lossy(s));
    }
  }
}

TEST_F(StreamDetokenizerTest, KnownReplacements) {
  auto stream = [&](const std::vector<std::string>& parts) {
    StreamDetokenizer d(*tok_);
    std::string out;
    for (const auto& p : parts)
      out += d.push(p.size() == 1 || !tok_->token_to_id(p) ? id_of(p) : *tok_->token_to_id(p));
    return out + d.flush();
  };
  EXPECT_EQ(stream({"x", "\x80", "y"}), "x" + R + "y");
  EXPECT_EQ(stream({"\xE4", "\xB8", "a"}), R + "a");
  EXPECT_EQ(stream({"\xF0", "\x9F", "\x98"}), R);
  EXPECT_EQ(stream({"\xF0\x9F\x98", "\x80", "!"}), "\xF0\x9F\x98\x80!");
  // An added token after an unfinished character: the character is replaced, the token kept.
  EXPECT_EQ(stream({"\xE4", "<t>"}), R + "<t>");
}

TEST_F(StreamDetokenizerTest, HoldsBackUntilTheCharacterIsComplete) {
  StreamDetokenizer d(*tok_);
  EXPECT_EQ(d.push(id_of("\xF0")), "");
  EXPECT_EQ(d.push(id_of("\x9F")), "");
  EXPECT_EQ(d.push(id_of("\x98")), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.push(id_of("\x80")), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.flush(), "");
}

TEST_F(StreamDetokenizerTest, SkippedSpecialTokensDoNotBreakCharacters) {
  const int32_t special = *tok_->token_to_id("<s>");
  const int32_t plain = *tok_->token_to_id("<t>");
  StreamDetokenizer skip(*tok_, true);
  std::string out = skip.push(id_of("\xE4"));
  out += skip.push(special);
  out += skip.push(id_of("\xBD\xA0"));
  out += skip.push(plain);  // not special: kept
  out += skip.flush();
  EXPECT_EQ(out, "\xE4\xBD\xA0<t>");
  const std::vector<int32_t> ids = {id_of("\xE4"), special, id_of("\xBD\xA0"), plain};
  EXPECT_EQ(out, tok_->decode(ids, true));

  StreamDetokenizer keep(*tok_);
  out.clear();
  for (int32_t id : ids) out += keep.push(id);
  out += keep.flush();
  EXPECT_EQ(out, tok_->decode(ids, false));
  EXPECT_EQ(out, R + "<s>" + R + R + "<t>");
}

TEST_F(StreamDetokenizerTest, UnknownIdThrowsAndKeepsState) {
  StreamDetokenizer d(*tok_);
  EXPECT_EQ(d.push(id_of("\xC3")), "");
  EXPECT_THROW(d.push(tok_->vocab_size() + 5), Error);
  EXPECT_THROW(d.push(-1), Error);
  EXPECT_EQ(d.push(id_of("\xA9")), "\xC3\xA9");
}

TEST_F(StreamDetokenizerTest, ReusableAfterFlush) {
  StreamDetokenizer d(*tok_);
  EXPECT_EQ(d.push(id_of("\xC3")), "");
  EXPECT_EQ(d.flush(), R);
  EXPECT_EQ(d.push(id_of("a")), "a");
  EXPECT_EQ(d.flush(), "");
}

}  // namespace
}  // namespace spark
