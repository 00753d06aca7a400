#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <set>

namespace spark {
namespace {

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  const auto merges = train_bpe({{"abab", 10}, {"cd", 3}, {"xy", 1}}, 3);
  ASSERT_EQ(merges.size(), 3u);
  EXPECT_EQ(merges[0].left + merges[0].right, "ab");  // 20 occurrences
  EXPECT_EQ(merges[1].left + merges[1].right, "abab");
  EXPECT_EQ(merges[2].left + merges[2].right, "cd");
}

TEST(BpeTrainer, DeterministicWhateverTheInputOrder) {
  std::vector<std::pair<std::string, int64_t>> words = {{"hello", 3}, {"world", 3}, {"help", 2}, {"low", 5}};
  const auto a = train_bpe(words, 12);
  std::reverse(words.begin(), words.end());
  const auto b = train_bpe(words, 12);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].left, b[i].left);
    EXPECT_EQ(a[i].right, b[i].right);
  }
}

TEST(BpeTrainer, FillsToTheRequestedSizeWithNewTokensOnly) {
  const auto merges = train_bpe({{"ab", 1}}, 500, {"ba"});
  std::set<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.insert(std::string(1, static_cast<char>(b)));
  for (const auto& m : merges) {
    ASSERT_TRUE(tokens.count(m.left) && tokens.count(m.right)) << "merge of unknown tokens";
    const std::string t = m.left + m.right;
    EXPECT_TRUE(tokens.insert(t).second) << "token created twice: " << t;
    EXPECT_NE(t, "ba") << "forbidden token created";
  }
  EXPECT_EQ(tokens.size(), 256u + 500u);
  EXPECT_EQ(merges[0].left + merges[0].right, "ab");
}

TEST(BpeTrainer, ForbiddenTokensAreNeverLearned) {
  const auto merges = train_bpe({{"<think>", 50}, {"think", 2}}, 6, {"<think>"});
  for (const auto& m : merges) EXPECT_NE(m.left + m.right, "<think>");
}

}  // namespace
}  // namespace spark
