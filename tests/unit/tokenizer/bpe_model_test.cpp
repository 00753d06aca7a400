#include "tokenizer/bpe_model.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

namespace spark {
namespace {

// A model over a small alphabet where token ids are assigned by the test: bytes 'a'..'e' are ids
// 0..4, merges create ids from 5 on.
struct Toy {
  std::array<int32_t, 256> byte_ids;
  std::vector<std::array<int32_t, 3>> merges;
  std::map<std::string, int32_t> ids;  // token bytes -> id
  std::vector<std::string> text;       // id -> bytes

  Toy() {
    byte_ids.fill(-1);
    for (char c = 'a'; c <= 'e'; ++c) add(std::string(1, c));
    for (char c = 'a'; c <= 'e'; ++c) byte_ids[static_cast<unsigned char>(c)] = ids[std::string(1, c)];
  }
  int32_t add(const std::string& s) {
    auto [it, inserted] = ids.emplace(s, static_cast<int32_t>(text.size()));
    if (inserted) text.push_back(s);
    return it->second;
  }
  void merge(const std::string& a, const std::string& b) {
    merges.push_back({ids.at(a), ids.at(b), add(a + b)});
  }
  BpeModel model(BpeOptions options = {}) const {
    BpeModel::WordMap whole;
    for (const auto& [s, id] : ids) whole[s] = id;
    return BpeModel(byte_ids, merges, std::move(whole), options);
  }
  std::vector<std::string> encode(const BpeModel& m, const std::string& word) const {
    std::vector<int32_t> out;
    m.encode_word(word, out);
    std::vector<std::string> pieces;
    for (int32_t id : out) pieces.push_back(id < static_cast<int32_t>(text.size()) ? text[id] : "?");
    return pieces;
  }
};

using Pieces = std::vector<std::string>;

TEST(BpeModel, EqualRanksMergeLeftmostFirst) {
  Toy t;
  t.merge("a", "a");
  const BpeModel m = t.model();
  EXPECT_EQ(t.encode(m, "aaa"), (Pieces{"aa", "a"}));
  EXPECT_EQ(t.encode(m, "aaaa"), (Pieces{"aa", "aa"}));
  EXPECT_EQ(t.encode(m, "aaaaa"), (Pieces{"aa", "aa", "a"}));
}

TEST(BpeModel, LowerRankWinsWhereverItIs) {
  Toy t;
  t.merge("b", "c");  // rank 0
  t.merge("a", "b");  // rank 1
  const BpeModel m = t.model();
  EXPECT_EQ(t.encode(m, "abc"), (Pieces{"a", "bc"}));
  EXPECT_EQ(t.encode(m, "abd"), (Pieces{"ab", "d"}));
}

TEST(BpeModel, MergedTokensMergeFurther) {
  Toy t;
  t.merge("a", "b");
  t.merge("c", "d");
  t.merge("ab", "cd");
  t.merge("abcd", "e");
  const BpeModel m = t.model();
  EXPECT_EQ(t.encode(m, "abcde"), (Pieces{"abcde"}));
  EXPECT_EQ(t.encode(m, "abcdabcd"), (Pieces{"abcd", "abcd"}));
  EXPECT_EQ(t.encode(m, "eabcd"), (Pieces{"e", "abcd"}));
}

TEST(BpeModel, SingleBytesAndMissingBytes) {
  Toy t;
  t.merge("a", "b");
  EXPECT_EQ(t.encode(t.model(), "a"), (Pieces{"a"}));
  // 'z' has no token: dropped without an unk, as Hugging Face does, before merging (so a and b meet).
  EXPECT_EQ(t.encode(t.model(), "azb"), (Pieces{"ab"}));
  EXPECT_EQ(t.encode(t.model(), "z"), Pieces{});
  BpeOptions unk;
  unk.unk_id = t.ids.at("e");
  EXPECT_EQ(t.encode(t.model(unk), "azzb"), (Pieces{"a", "e", "e", "b"}));
  unk.fuse_unk = true;
  EXPECT_EQ(t.encode(t.model(unk), "azzb"), (Pieces{"a", "e", "b"}));
}

TEST(BpeModel, IgnoreMergesTakesVocabularyWordsWhole) {
  Toy t;
  t.merge("a", "b");
  t.merge("b", "c");
  t.add("abc");  // in the vocabulary, but no merge builds it
  EXPECT_EQ(t.encode(t.model(), "abc"), (Pieces{"ab", "c"}));
  BpeOptions options;
  options.ignore_merges = true;
  EXPECT_EQ(t.encode(t.model(options), "abc"), (Pieces{"abc"}));
  EXPECT_EQ(t.encode(t.model(options), "abcd"), (Pieces{"ab", "c", "d"}));
}

// The straightforward quadratic algorithm: merge the leftmost occurrence of the lowest-ranked pair
// until none is left. The heap implementation must agree with it on any merge table in which every
// merged token has one merge (then a queued entry cannot be confused with another pair).
std::vector<int32_t> naive(const Toy& t, const std::string& word) {
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> rank;  // -> (rank, id)
  for (size_t r = 0; r < t.merges.size(); ++r)
    rank[{t.merges[r][0], t.merges[r][1]}] = {int32_t(r), t.merges[r][2]};
  std::vector<int32_t> s;
  for (unsigned char c : word) s.push_back(t.byte_ids[c]);
  for (;;) {
    int best = -1;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      auto it = rank.find({s[i], s[i + 1]});
      if (it != rank.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best = static_cast<int>(i);
      }
    }
    if (best < 0) return s;
    s[best] = rank[{s[best], s[best + 1]}].second;
    s.erase(s.begin() + best + 1);
  }
}

TEST(BpeModel, HeapMergeAgreesWithTheQuadraticAlgorithm) {
  std::mt19937 rng(1234);
  for (int table = 0; table < 20; ++table) {
    Toy t;
    std::vector<std::string> tokens(t.text);
    for (int k = 0; k < 60; ++k) {
      const std::string a = tokens[rng() % tokens.size()], b = tokens[rng() % tokens.size()];
      if (a.size() + b.size() > 8 || t.ids.count(a + b)) continue;
      t.merge(a, b);
      tokens.push_back(a + b);
    }
    const BpeModel m = t.model();
    for (int w = 0; w < 200; ++w) {
      std::string word;
      const size_t len = 2 + rng() % 30;
      for (size_t i = 0; i < len; ++i) word.push_back(static_cast<char>('a' + rng() % 5));
      std::vector<int32_t> got;
      m.encode_word(word, got);
      ASSERT_EQ(got, naive(t, word)) << "table " << table << " word " << word;
      std::vector<int32_t> again;  // second time from the cache
      m.encode_word(word, again);
      ASSERT_EQ(again, got);
    }
  }
}

TEST(BpeModel, LongWordsAndConcurrentEncoders) {
  Toy t;
  t.merge("a", "b");
  t.merge("ab", "ab");
  const BpeModel m = t.model();
  std::string longword;
  for (int i = 0; i < 5000; ++i) longword += "ab";
  std::vector<int32_t> expect;
  m.encode_word(longword, expect);
  ASSERT_EQ(expect.size(), 2500u);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 300; ++i) {
        std::vector<int32_t> got;
        const std::string w = std::string(1 + (i % 7), 'a') + "b" + (k % 2 ? "ab" : "");
        m.encode_word(w, got);
        std::vector<int32_t> ref;
        m.encode_word(w, ref);
        if (got != ref) ++failures[k];
      }
      std::vector<int32_t> got;
      m.encode_word(longword, got);
      if (got != expect) ++failures[k];
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, (std::vector<int>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace spark
