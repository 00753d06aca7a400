#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/synthetic_checkpoint.h"
#include "spark/model_config.h"
#include "util/process_memory.h"

namespace spark {

namespace {

ModelConfig tiny_config() {
  return parse_model_config(builtin_config("tiny"), "tiny");
}

}  // namespace

TEST(KvPagePool, BudgetIsHonouredToWithinOnePage) {
  ModelConfig cfg = tiny_config();
  KvPagePool probe(cfg, 16, 0);
  const int64_t page = probe.page_bytes();
  EXPECT_EQ(page, 2 * cfg.num_full_layers() * 16 * cfg.kv_dim() * 4);
  for (int64_t budget : {page, 5 * page + 1, int64_t{8 * 1024 * 1024 + 12345}}) {
    KvPagePool pool(cfg, 16, budget);
    EXPECT_LE(pool.bytes_allocated(), budget);
    EXPECT_LT(budget - pool.bytes_allocated(), page);
  }
  EXPECT_ANY_THROW(KvPagePool(cfg, 16, page - 1));
}

// Resident memory follows use: nothing at construction, the pages written once they are written, never
// more than the budget, and freed pages are reused before untouched ones. (Prefaulted pools are measured
// through the engine in engine_test.cpp.)
TEST(KvPagePool, MemoryBecomesResidentAsPagesAreUsed) {
  ModelConfig cfg = tiny_config();
  const int64_t mib = 1024 * 1024, budget = 48 * mib;
#if defined(__SANITIZE_ADDRESS__)
  const double shadow = 1.0 / 8;  // AddressSanitizer commits one shadow byte per eight written
#else
  const double shadow = 0.0;
#endif
  const int64_t before = read_process_memory().rss_anon_bytes;
  KvPagePool pool(cfg, 16, budget);
  const int64_t constructed = read_process_memory().rss_anon_bytes;
  EXPECT_LT(constructed - before, 2 * mib) << "the budget is reserved, not resident";

  // Use half the pages, free them, use them again: residency is the high-water mark, half the budget.
  std::vector<int> held;
  for (int64_t i = 0; i < pool.max_pages() / 2; ++i) {
    held.push_back(pool.allocate());
    std::memset(pool.page(held.back()), 1, static_cast<size_t>(pool.page_bytes()));
  }
  for (int p : held) pool.release(p);
  for (int64_t i = 0; i < pool.max_pages() / 2; ++i) {
    const int p = pool.allocate();
    EXPECT_TRUE(std::find(held.begin(), held.end(), p) != held.end()) << "a freed page is reused first";
  }
  const int64_t half = read_process_memory().rss_anon_bytes - constructed;
  const double half_bytes = static_cast<double>(pool.max_pages() / 2 * pool.page_bytes());
  EXPECT_GT(static_cast<double>(half), half_bytes - 2.0 * mib);
  EXPECT_LT(static_cast<double>(half), half_bytes * (1 + shadow) + 2.0 * mib);

  // Every page in use: the whole allocation is resident, and not a page more is handed out.
  while (true) {
    const int p = pool.allocate();
    if (p < 0) break;
    std::memset(pool.page(p), 1, static_cast<size_t>(pool.page_bytes()));
  }
  EXPECT_EQ(pool.pages_in_use(), pool.max_pages());
  const int64_t full = read_process_memory().rss_anon_bytes - constructed;
  EXPECT_GT(static_cast<double>(full), static_cast<double>(pool.bytes_allocated()) - 2.0 * mib);
  EXPECT_LT(static_cast<double>(full),
            static_cast<double>(pool.bytes_allocated()) * (1 + shadow) + 2.0 * mib);
}

TEST(KvPagePool, RefcountedPagesReturnWhenTheLastHolderReleases) {
  ModelConfig cfg = tiny_config();
  KvPagePool pool(cfg, 16, 3 * KvPagePool(cfg, 16, 0).page_bytes());
  int a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_GE(std::min({a, b, c}), 0);
  EXPECT_EQ(pool.allocate(), -1);
  pool.add_ref(b);
  pool.release(b);
  EXPECT_EQ(pool.allocate(), -1);  // still held once
  pool.release(b);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.pages_in_use(), 3);
}

TEST(SequenceKv, ReserveIsAllOrNothing) {
  ModelConfig cfg = tiny_config();
  KvPagePool probe(cfg, 16, 0);
  const int ring = probe.ring_pages();
  KvPagePool pool(cfg, 16, (ring + 4) * probe.page_bytes());
  SequenceKv kv(pool);
  EXPECT_EQ(kv.pages_needed(40), ring + 3);
  EXPECT_TRUE(kv.reserve(40));  // the rings + 3 blocks
  EXPECT_EQ(pool.pages_in_use(), ring + 3);
  EXPECT_FALSE(kv.reserve(80));  // needs 5 blocks: fails and keeps the 3 it had
  EXPECT_EQ(pool.pages_in_use(), ring + 3);
  EXPECT_EQ(kv.reserved_tokens(), 48);
  kv.clear();
  EXPECT_EQ(pool.pages_in_use(), 0);
}

TEST(SequenceKv, SlidingRingHoldsExactlyWindowMinusOneEntries) {
  ModelConfig cfg = tiny_config();
  KvPagePool pool(cfg, 16, 0);
  SequenceKv kv(pool);
  ASSERT_TRUE(kv.reserve(1));
  const int64_t per_entry = 2 * cfg.kv_dim() * static_cast<int64_t>(sizeof(float));  // K and V
  EXPECT_EQ(kv.ring_bytes(), cfg.num_sliding_layers() * (cfg.sliding_window - 1) * per_entry);
  EXPECT_LT(kv.ring_bytes_reserved() - kv.ring_bytes(), pool.page_bytes());
  // Positions p and p + (window - 1) share a ring slot: the ring never holds more than window - 1.
  EXPECT_EQ(kv.ring_keys(0, 3), kv.ring_keys(0, 3 + cfg.sliding_window - 1));
  EXPECT_NE(kv.ring_keys(0, 3), kv.ring_keys(0, 4));
  EXPECT_NE(kv.ring_keys(1, 3), kv.ring_values(0, 3));
}

TEST(SequenceKv, AdoptedPrefixSharesCompleteBlocksAndCopiesTheRest) {
  ModelConfig cfg = tiny_config();
  KvPagePool pool(cfg, 16, 0);
  SequenceKv a(pool);
  ASSERT_TRUE(a.reserve(40));
  a.advance(40);
  *a.full_keys(0, 5) = 1.5f;
  *a.full_keys(1, 37) = 2.5f;
  *a.ring_values(2, 39) = 3.5f;
  std::vector<int> snap = a.snapshot_ring();
  ASSERT_EQ(snap.size(), a.ring().size());
  SequenceKv b(pool);
  ASSERT_TRUE(b.adopt_prefix(a.blocks(), snap, 40));
  EXPECT_EQ(b.num_tokens(), 40);
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);  // complete blocks shared
  EXPECT_EQ(b.blocks()[1], a.blocks()[1]);
  EXPECT_NE(b.blocks()[2], a.blocks()[2]);  // the partial block is a copy
  EXPECT_EQ(pool.refcount(a.blocks()[0]), 2);
  EXPECT_EQ(*b.full_keys(0, 5), 1.5f);
  EXPECT_EQ(*b.full_keys(1, 37), 2.5f);
  EXPECT_EQ(*b.ring_values(2, 39), 3.5f);
  for (int p : snap) pool.release(p);
}

}  // namespace spark
