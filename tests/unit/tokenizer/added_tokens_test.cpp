#include "tokenizer/added_tokens.h"

#include <gtest/gtest.h>

namespace spark {
namespace {

using Parts = std::vector<std::pair<std::string, int32_t>>;  // text, id (-1 for plain text)

Parts split(const AddedTokenMatcher& m, std::string_view text) {
  std::vector<TextSegment> segments;
  m.split(text, segments);
  Parts out;
  for (const auto& s : segments) out.emplace_back(std::string(text.substr(s.begin, s.end - s.begin)), s.id);
  return out;
}

AddedToken token(int32_t id, std::string content) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  return t;
}

TEST(AddedTokens, CutsOutEveryOccurrenceAnywhere) {
  const AddedTokenMatcher m({token(3, "<think>"), token(4, "</think>")});
  EXPECT_EQ(split(m, "a<think>b</think>c"),
            (Parts{{"a", -1}, {"<think>", 3}, {"b", -1}, {"</think>", 4}, {"c", -1}}));
  EXPECT_EQ(split(m, "mid<think>word"), (Parts{{"mid", -1}, {"<think>", 3}, {"word", -1}}));
  EXPECT_EQ(split(m, "<think></think><think>"), (Parts{{"<think>", 3}, {"</think>", 4}, {"<think>", 3}}));
  EXPECT_EQ(split(m, "<think"), (Parts{{"<think", -1}}));
  EXPECT_EQ(split(m, "<<think>>"), (Parts{{"<", -1}, {"<think>", 3}, {">", -1}}));
  EXPECT_EQ(split(m, ""), Parts{});
}

TEST(AddedTokens, LeftmostThenLongest) {
  const AddedTokenMatcher m({token(1, "<a>"), token(2, "<a><b>"), token(3, "<b>"), token(4, "b><c")});
  EXPECT_EQ(split(m, "x<a><b>y"), (Parts{{"x", -1}, {"<a><b>", 2}, {"y", -1}}));
  EXPECT_EQ(split(m, "x<a><c"), (Parts{{"x", -1}, {"<a>", 1}, {"<c", -1}}));
  // Leftmost wins over longer: "<b>" starts before "b><c" would.
  EXPECT_EQ(split(m, "<b><c"), (Parts{{"<b>", 3}, {"<c", -1}}));
}

TEST(AddedTokens, MultiByteContent) {
  const std::string bos =
      "<\xEF\xBD\x9C"
      "begin\xEF\xBD\x9C>";
  const AddedTokenMatcher m({token(0, bos)});
  EXPECT_EQ(split(m, "\xE4\xBD\xA0" + bos + "\xE5\xA5\xBD"),
            (Parts{{"\xE4\xBD\xA0", -1}, {bos, 0}, {"\xE5\xA5\xBD", -1}}));
}

TEST(AddedTokens, LstripAndRstripTakeTheWhitespaceAround) {
  AddedToken l = token(1, "<l>"), r = token(2, "<r>");
  l.lstrip = true;
  r.rstrip = true;
  const AddedTokenMatcher m({l, r});
  EXPECT_EQ(split(m, "a  <l> b"), (Parts{{"a", -1}, {"  <l>", 1}, {" b", -1}}));
  EXPECT_EQ(split(m, "a <r> \t b"), (Parts{{"a ", -1}, {"<r> \t ", 2}, {"b", -1}}));
  // Unicode white space counts (U+3000); the strip never reaches into the previous token.
  EXPECT_EQ(split(m, "<r> \xE3\x80\x80<l>x"), (Parts{{"<r> \xE3\x80\x80", 2}, {"<l>", 1}, {"x", -1}}));
}

TEST(AddedTokens, SingleWordOnlyMatchesWholeWords) {
  AddedToken t = token(7, "<mask>");
  t.single_word = true;
  const AddedTokenMatcher m({t});
  EXPECT_EQ(split(m, "<mask> a <mask>"), (Parts{{"<mask>", 7}, {" a ", -1}, {"<mask>", 7}}));
  EXPECT_EQ(split(m, "A<mask> <mask>ony"), (Parts{{"A<mask> <mask>ony", -1}}));
  EXPECT_EQ(split(m, "<mask>, x"), (Parts{{"<mask>", 7}, {", x", -1}}));
}

TEST(AddedTokens, NormalizedTokensMatchInASecondPass) {
  AddedToken longer = token(2, "abc");
  longer.normalized = true;
  const AddedTokenMatcher m({token(1, "ab"), longer});
  // The plain token is found first over the whole text, so the longer normalized one never sees "abc".
  EXPECT_EQ(split(m, "xabc"), (Parts{{"x", -1}, {"ab", 1}, {"c", -1}}));
  EXPECT_EQ(split(m, "a bc abc"), (Parts{{"a bc ", -1}, {"ab", 1}, {"c", -1}}));
  AddedToken only = token(3, "zz");
  only.normalized = true;
  const AddedTokenMatcher n({token(1, "ab"), only});
  EXPECT_EQ(split(n, "zzabzz"), (Parts{{"zz", 3}, {"ab", 1}, {"zz", 3}}));
}

}  // namespace
}  // namespace spark
