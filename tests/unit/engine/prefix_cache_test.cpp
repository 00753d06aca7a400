// The block cache on its own: chained-hash lookup of the longest resumable prefix, the sliding-window
// condition, the eviction order (unneeded sliding blocks, then least-recently-used leaves), blocks held by
// sequences never evicted, and every reference returned.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "model/synthetic_checkpoint.h"
#include "spark/model_config.h"

namespace spark {

namespace {

constexpr int kBlock = 16;

class PrefixCacheTest : public ::testing::Test {
 protected:
  PrefixCacheTest()
      : config_(parse_model_config(builtin_config("tiny"), "tiny")),  // window 32
        pool_(config_, kBlock, 200 * KvPagePool(config_, kBlock, 0).page_bytes()),
        cache_(pool_) {}

  static std::vector<int32_t> tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(14, 900);
    std::vector<int32_t> t(n);
    for (auto& v : t) v = dist(rng);
    return t;
  }

  std::vector<int> slide_block() {
    std::vector<int> pages;
    for (int i = 0; i < pool_.slide_pages_per_block(); ++i) pages.push_back(pool_.allocate());
    return pages;
  }

  // Inserts the blocks of `t` as a sequence would (its own full page per block, released afterwards so
  // the cache holds the only reference); without_slide lists blocks inserted without a sliding block.
  void insert_chain(const std::vector<int32_t>& t, std::vector<int> without_slide = {}) {
    uint64_t parent = PrefixCache::kRootHash;
    for (size_t b = 0; b * kBlock + kBlock <= t.size(); ++b) {
      const int page = pool_.allocate();
      const bool skip =
          std::find(without_slide.begin(), without_slide.end(), static_cast<int>(b)) != without_slide.end();
      auto h = cache_.insert(parent, std::span<const int32_t>(t.data() + b * kBlock, kBlock), page,
                             skip ? std::vector<int>{} : slide_block());
      pool_.release(page);
      ASSERT_TRUE(h.has_value());
      parent = *h;
    }
  }

  ModelConfig config_;
  KvPagePool pool_;
  PrefixCache cache_;
};

}  // namespace

TEST_F(PrefixCacheTest, FindsTheLongestSharedBlockPrefix) {
  const auto a = tokens(100, 1);  // 6 complete blocks
  insert_chain(a);
  EXPECT_EQ(cache_.blocks(), 6);
  auto b = a;
  b[53] += 1;  // diverges inside block 3
  PrefixCache::Match m = cache_.lookup(b, static_cast<int64_t>(b.size()) - 1);
  EXPECT_EQ(m.tokens, 48);
  ASSERT_EQ(m.full_pages.size(), 3u);
  // Only the blocks holding the 31 positions before 48 (blocks 1 and 2) are read for the rings.
  EXPECT_EQ(m.slide[0], nullptr);
  EXPECT_NE(m.slide[1], nullptr);
  EXPECT_NE(m.slide[2], nullptr);
  EXPECT_EQ(cache_.lookup(a, 40).tokens, 32);  // max_len caps it (a prompt keeps one token to compute)
  EXPECT_EQ(cache_.lookup(tokens(100, 2), 99).tokens, 0);
  auto first_differs = a;
  first_differs[0] += 1;
  EXPECT_EQ(cache_.lookup(first_differs, 99).tokens, 0);
}

TEST_F(PrefixCacheTest, ResumesOnlyWhereTheSlidingWindowIsCached) {
  const auto a = tokens(64, 3);
  insert_chain(a, {2});  // block 2 has no sliding block
  // Resuming at 64 or 48 needs block 2's sliding layers; at 32 only blocks 0 and 1.
  EXPECT_EQ(cache_.lookup(a, 64).tokens, 32);
  // A later sequence that computed block 2 fills the gap.
  auto insert = [&](uint64_t parent, size_t block, std::vector<int> slide) {
    const int page = pool_.allocate();
    auto h = cache_.insert(parent, std::span<const int32_t>(a.data() + block * kBlock, kBlock), page,
                           std::move(slide));
    pool_.release(page);
    return h;
  };
  auto h0 = insert(PrefixCache::kRootHash, 0, {});
  ASSERT_TRUE(h0);
  auto h1 = insert(*h0, 1, {});
  ASSERT_TRUE(h1);
  ASSERT_TRUE(insert(*h1, 2, slide_block()));
  EXPECT_EQ(cache_.lookup(a, 64).tokens, 64);
  EXPECT_EQ(cache_.blocks(), 4);  // the same blocks again: no new nodes
}

TEST_F(PrefixCacheTest, EvictsSpareSlidingBlocksFirstThenOldestLeaves) {
  const auto a = tokens(96, 4);  // 6 blocks: only blocks 4 and 5 cover the window before the leaf's end
  const auto b = tokens(32, 5);  // an unrelated 2-block chain
  insert_chain(a);
  insert_chain(b);
  const int per = pool_.slide_pages_per_block();
  EXPECT_EQ(pool_.pages_in_use(), 8 * (1 + per));
  EXPECT_EQ(cache_.pages_held_exclusively(), pool_.pages_in_use());
  // Freeing a few pages drops spare sliding blocks of chain a, not blocks anyone could resume from.
  cache_.evict(pool_.pages_free() + 2 * per);
  EXPECT_EQ(cache_.evicted_sliding_blocks(), 2);
  EXPECT_EQ(cache_.evicted_blocks(), 0);
  EXPECT_EQ(cache_.lookup(a, 96).tokens, 96);  // still resumable at its end
  EXPECT_EQ(cache_.lookup(b, 32).tokens, 32);  // b is now the most recently used
  // More pressure: the other spare sliding blocks go, then the least recently used leaves (chain a's).
  cache_.evict(pool_.pages_free() + 2 * per + 1);
  EXPECT_EQ(cache_.evicted_sliding_blocks(), 4);
  EXPECT_EQ(cache_.evicted_blocks(), 1);
  EXPECT_EQ(cache_.lookup(b, 32).tokens, 32);
  EXPECT_EQ(cache_.lookup(a, 96).tokens, 0);  // its window is gone with its last block
}

TEST_F(PrefixCacheTest, NeverEvictsBlocksASequenceHoldsAndReturnsEveryReference) {
  const auto a = tokens(64, 6);
  insert_chain(a);
  SequenceKv seq(pool_);
  PrefixCache::Match m = cache_.lookup(a, 63);
  ASSERT_EQ(m.tokens, 48);
  ASSERT_TRUE(seq.adopt_prefix(m.full_pages, m.slide));
  for (int p : m.full_pages) EXPECT_EQ(pool_.refcount(p), 2);  // the cache's and the sequence's
  // Pages only the cache holds: block 3's full page and all 4 sliding blocks (the counter follows the
  // sequence's references as they come and go).
  const int64_t slide_pages = 4 * pool_.slide_pages_per_block();
  EXPECT_EQ(cache_.pages_held_exclusively(), 1 + slide_pages);
  {
    SequenceKv other(pool_);
    ASSERT_TRUE(other.adopt_prefix(m.full_pages, m.slide));
    EXPECT_EQ(cache_.pages_held_exclusively(), 1 + slide_pages);
  }
  cache_.clear();
  // Block 3 was a leaf no sequence held; blocks 0-2 are held, so they stay (and so does their chain).
  EXPECT_EQ(cache_.blocks(), 3);
  EXPECT_EQ(cache_.evicted_blocks(), 1);
  EXPECT_EQ(pool_.pages_in_use(), seq.pages_held());
  EXPECT_EQ(cache_.pages_held_exclusively(), 0);  // the cache holds only what the sequence holds too
  seq.clear();
  EXPECT_EQ(cache_.pages_held_exclusively(), 3);  // blocks 0-2, now the cache's alone
  cache_.clear();
  EXPECT_EQ(cache_.blocks(), 0);
  EXPECT_EQ(pool_.pages_in_use(), 0);
}

TEST_F(PrefixCacheTest, ChainedHashDependsOnTheWholePrefix) {
  const auto a = tokens(16, 7);
  const uint64_t h = PrefixCache::chain_hash(PrefixCache::kRootHash, a);
  EXPECT_NE(PrefixCache::chain_hash(h, a), h);
  EXPECT_NE(PrefixCache::chain_hash(h, a), PrefixCache::chain_hash(PrefixCache::chain_hash(h, a), a));
  // A block cannot join a chain whose parent is not cached.
  const int page = pool_.allocate();
  EXPECT_FALSE(cache_.insert(12345, a, page, {}).has_value());
  pool_.release(page);
  EXPECT_EQ(pool_.pages_in_use(), 0);
}

}  // namespace spark
