#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include "parser_test_util.h"

namespace spark {

namespace {

struct ReasoningFixture {
  const char* name;
  bool thinking;
  std::string text;
  std::string reasoning;
  std::string content;
  bool closed;
  std::vector<std::string> recoveries;
};

const std::vector<ReasoningFixture>& reasoning_fixtures() {
  static const std::vector<ReasoningFixture> fixtures = {
      {"thinking_split",
       true,
       "Let me think: 2+2=4.</think>The answer is 4.",
       "Let me think: 2+2=4.",
       "The answer is 4.",
       true,
       {}},
      {"thinking_repeated_open",
       true,
       "<think>plan</think>done",
       "plan",
       "done",
       true,
       {"think_open_dropped"}},
      {"thinking_unterminated",
       true,
       "still reasoning about </thi",
       "still reasoning about </thi",
       "",
       false,
       {}},
      {"thinking_empty_reasoning", true, "</think>just content", "", "just content", true, {}},
      {"thinking_only_first_close_counts", true, "a</think>b</think>c", "a", "b</think>c", true, {}},
      {"thinking_open_not_at_start", true, "x<think>y</think>z", "x<think>y", "z", true, {}},
      {"thinking_partial_open_then_text", true, "<thin k</think>z", "<thin k", "z", true, {}},
      {"thinking_multibyte", true, "réfléchir 😀 ≤</think>résumé 😀", "réfléchir 😀 ≤", "résumé 😀", true, {}},
      {"thinking_empty_output", true, "", "", "", false, {}},
      {"thinking_lt_only", true, "<", "<", "", false, {}},
      {"no_think_plain", false, "Hello <b>world</b>", "", "Hello <b>world</b>", false, {}},
      {"no_think_stray_close", false, "</think>Hi", "", "Hi", false, {"think_close_dropped"}},
      {"no_think_close_later_is_content", false, "Hi</think>there", "", "Hi</think>there", false, {}},
      {"no_think_partial_close_at_end", false, "</thi", "", "</thi", false, {}},
      {"no_think_open_is_content", false, "<think>x</think>y", "", "<think>x</think>y", false, {}},
  };
  return fixtures;
}

}  // namespace

TEST(ReasoningParser, EveryFixtureAtEveryChunking) {
  for (const ReasoningFixture& f : reasoning_fixtures()) {
    for (const auto& chunks : test::chunkings(f.text)) {
      SCOPED_TRACE(std::string(f.name) + " " + test::describe(chunks));
      const test::ReasoningRun run = test::run_reasoning(f.thinking, chunks);
      EXPECT_EQ(run.reasoning, f.reasoning);
      EXPECT_EQ(run.content, f.content);
      EXPECT_EQ(run.closed, f.closed);
      EXPECT_EQ(test::kinds(run.recoveries), f.recoveries);
    }
  }
}

TEST(ReasoningParser, HoldsBackOnlyAPossiblePartialCloseTag) {
  ReasoningParser parser(true);
  ReasoningDelta d = parser.feed("abc</th");
  EXPECT_EQ(d.reasoning, "abc");
  EXPECT_EQ(d.content, "");
  EXPECT_FALSE(parser.reasoning_closed());
  d = parser.feed("x");  // `</thx` cannot become the tag: released at once
  EXPECT_EQ(d.reasoning, "</thx");
  d = parser.feed("</think>ok");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "ok");
  EXPECT_TRUE(parser.reasoning_closed());
  d = parser.feed("<tool_call");  // content is not this parser's business: nothing held
  EXPECT_EQ(d.content, "<tool_call");
  EXPECT_TRUE(parser.finish().empty());
}

TEST(ReasoningParser, StartOfThinkingOutputWaitsOnlyForAPossibleOpenTag) {
  ReasoningParser parser(true);
  EXPECT_TRUE(parser.feed("<thi").empty());
  ReasoningDelta d = parser.feed("s is");
  EXPECT_EQ(d.reasoning, "<this is");
  EXPECT_TRUE(parser.recoveries().empty());

  ReasoningParser other(true);
  d = other.feed("Okay");
  EXPECT_EQ(d.reasoning, "Okay");
}

TEST(ReasoningParser, UnterminatedBlockIsAllReasoningAtFinish) {
  ReasoningParser parser(true);
  ReasoningDelta d = parser.feed("long thought </");
  EXPECT_EQ(d.reasoning, "long thought ");
  d = parser.finish();
  EXPECT_EQ(d.reasoning, "</");
  EXPECT_EQ(d.content, "");
  EXPECT_FALSE(parser.reasoning_closed());
}

TEST(ReasoningParser, ThinkingOffPassesContentThrough) {
  ReasoningParser parser(false);
  EXPECT_FALSE(parser.thinking());
  ReasoningDelta d = parser.feed("Hello");
  EXPECT_EQ(d.content, "Hello");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_FALSE(parser.reasoning_closed());
}

}  // namespace spark
