#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include "model/synthetic_checkpoint.h"
#include "spark/model_config.h"

namespace spark {

namespace {

ModelConfig tiny_config() { return parse_model_config(builtin_config("tiny"), "tiny"); }

}  // namespace

TEST(KvBlockPool, AllocatesUpToTheLimitAndReusesFreedBlocks) {
  KvBlockPool pool(2, 64, 16, 3);
  EXPECT_EQ(pool.bytes_per_block(), 2 * 2 * 16 * 64 * 4);
  int a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_GE(a, 0);
  EXPECT_GE(b, 0);
  EXPECT_GE(c, 0);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.blocks_in_use(), 3);
  pool.release(b);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.blocks_allocated(), 3);
}

TEST(SequenceKv, ReserveIsAllOrNothing) {
  ModelConfig cfg = tiny_config();
  KvBlockPool pool(cfg.num_full_layers(), cfg.kv_dim(), 16, 4);
  SequenceKv kv(cfg, pool);
  EXPECT_TRUE(kv.reserve(40));  // 3 blocks
  EXPECT_EQ(pool.blocks_in_use(), 3);
  EXPECT_FALSE(kv.reserve(80));  // needs 5: fails and keeps the 3 it had
  EXPECT_EQ(pool.blocks_in_use(), 3);
  EXPECT_EQ(kv.reserved_tokens(), 48);
  kv.clear();
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(SequenceKv, SlidingRingHoldsExactlyWindowMinusOneEntries) {
  ModelConfig cfg = tiny_config();
  KvBlockPool pool(cfg.num_full_layers(), cfg.kv_dim(), 16, 0);
  SequenceKv kv(cfg, pool);
  const int64_t ring_bytes = kv.ring_bytes();
  const int64_t per_entry = 2 * cfg.kv_dim() * static_cast<int64_t>(sizeof(float));  // K and V
  EXPECT_EQ(ring_bytes, cfg.num_sliding_layers() * (cfg.sliding_window - 1) * per_entry);
  // Positions p and p + (window - 1) share a ring slot: the ring never holds more than window - 1.
  EXPECT_EQ(kv.ring_keys(0, 3), kv.ring_keys(0, 3 + cfg.sliding_window - 1));
  EXPECT_NE(kv.ring_keys(0, 3), kv.ring_keys(0, 4));
}

}  // namespace spark
