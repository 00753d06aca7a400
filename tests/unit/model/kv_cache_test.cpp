#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/synthetic_checkpoint.h"
#include "spark/error.h"
#include "spark/model_config.h"
#include "util/half.h"
#include "util/process_memory.h"
#include "util/thread_pool.h"

namespace spark {

namespace {

ModelConfig tiny_config() {
  return parse_model_config(builtin_config("tiny"), "tiny");
}

// Element 0 of an entry of a pool of `dtype`, written and read as the model does (bf16: rounded). fp8
// holds too few significant bits for the distinct values the layout tests write (multiples of 0.5 up to a
// few hundred), so there the tests write 2x as a 16-bit integer into elements 0 and 1: still where the
// model's first two elements go, which is what they check.
void put(KvDtype dtype, void* entry, float x) {
  if (dtype == KvDtype::kBf16) {
    *static_cast<uint16_t*>(entry) = f32_to_bf16(x);
  } else if (dtype == KvDtype::kFp8) {
    const int16_t v = static_cast<int16_t>(x * 2.0f);
    std::memcpy(entry, &v, sizeof v);
  } else {
    *static_cast<float*>(entry) = x;
  }
}

float get(KvDtype dtype, const void* entry) {
  if (dtype == KvDtype::kFp8) {
    int16_t v;
    std::memcpy(&v, entry, sizeof v);
    return static_cast<float>(v) / 2.0f;
  }
  return dtype == KvDtype::kBf16 ? bf16_to_f32(*static_cast<const uint16_t*>(entry))
                                 : *static_cast<const float*>(entry);
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

// A helper's reproducer: 64 sliding layers and a 2^30 window wrapped the int page count of a ring (4
// pages instead of 4.3 billion) and the first tokens wrote past them. Refused now, whatever the config.
TEST(KvPagePool, ARingTooLargeToIndexIsAnError) {
  ModelConfig cfg = tiny_config();
  cfg.hidden_size = 16;
  cfg.num_heads = 1;
  cfg.num_kv_heads = 1;
  cfg.head_dim = 16;
  cfg.num_layers = 65;
  cfg.layer_types.assign(64, LayerType::kSliding);
  cfg.layer_types.push_back(LayerType::kFull);
  cfg.sliding_window = 1073741826;
  try {
    KvPagePool pool(cfg, 16, 0);
    FAIL() << "ring pages " << pool.ring_pages();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding_window 1073741826"), std::string::npos) << e.what();
  }
}

// bf16 K/V take 2 bytes an element: pages, per-token bytes and ring bytes are half the f32 ones, so the
// same exact byte budget holds twice the pages (twice the tokens), still never above the budget.
TEST(KvPagePool, Bf16PagesHoldTheSamePositionsInHalfTheBytes) {
  ModelConfig cfg = tiny_config();
  KvPagePool f32(cfg, 16, 0);
  KvPagePool bf16(cfg, 16, 0, false, KvDtype::kBf16);
  EXPECT_EQ(bf16.page_bytes(), 2 * cfg.num_full_layers() * 16 * cfg.kv_dim() * 2);
  EXPECT_EQ(bf16.page_elements(), f32.page_elements());
  EXPECT_EQ(bf16.bytes_per_token_per_layer(), 2 * cfg.kv_dim() * 2);
  EXPECT_EQ(bf16.ring_pages(), f32.ring_pages());
  for (int64_t budget : {f32.page_bytes(), 5 * f32.page_bytes() + 1, int64_t{8 * 1024 * 1024 + 12345}}) {
    KvPagePool a(cfg, 16, budget);
    KvPagePool b(cfg, 16, budget, false, KvDtype::kBf16);
    EXPECT_EQ(b.max_pages(), budget / (f32.page_bytes() / 2));
    EXPECT_GE(b.max_pages(), 2 * a.max_pages());
    EXPECT_LE(b.bytes_allocated(), budget);
    EXPECT_LT(budget - b.bytes_allocated(), b.page_bytes());
  }
  SequenceKv s(bf16);
  ASSERT_TRUE(s.reserve(40));
  EXPECT_EQ(s.ring_bytes(), cfg.num_sliding_layers() * (cfg.sliding_window - 1) * 2 * cfg.kv_dim() * 2);
  // Inside a full layer's bf16 block, one KV head's rows are head_dim elements apart and the heads 16 rows
  // apart; V follows K. f32 blocks keep whole rows. Ring entries are whole rows.
  EXPECT_EQ(static_cast<char*>(s.full_keys(0, 1)) - static_cast<char*>(s.full_keys(0, 0)), cfg.head_dim * 2);
  EXPECT_EQ(bf16.full_row_stride(), cfg.head_dim);
  EXPECT_EQ(bf16.full_head_stride(), 16 * cfg.head_dim);
  EXPECT_EQ(f32.full_row_stride(), cfg.kv_dim());
  EXPECT_EQ(f32.full_head_stride(), cfg.head_dim);
  SequenceKv s32(f32);
  ASSERT_TRUE(s32.reserve(40));
  EXPECT_EQ(static_cast<char*>(s32.full_keys(0, 1)) - static_cast<char*>(s32.full_keys(0, 0)),
            cfg.kv_dim() * 4);
  EXPECT_EQ(static_cast<char*>(s.full_values(0, 0)) - static_cast<char*>(s.full_keys(0, 0)),
            16 * cfg.kv_dim() * 2);
  EXPECT_EQ(static_cast<char*>(s.full_keys(1, 0)) - static_cast<char*>(s.full_keys(0, 0)),
            2 * 16 * cfg.kv_dim() * 2);
  EXPECT_EQ(static_cast<char*>(s.ring_keys(0, 1)) - static_cast<char*>(s.ring_keys(0, 0)), cfg.kv_dim() * 2);
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), KvDtype::kBf16);
  EXPECT_EQ(parse_kv_cache_dtype("f32"), KvDtype::kF32);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KvDtype::kFp8);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), KvDtype::kFp8);
  EXPECT_STREQ(kv_dtype_name(KvDtype::kFp8), "fp8");
  EXPECT_ANY_THROW(parse_kv_cache_dtype("f16"));
  EXPECT_ANY_THROW(parse_kv_cache_dtype("fp8_e5m2"));
}

// fp8 K/V take 1 byte an element: a quarter of the f32 bytes per page, token and ring, so a byte budget
// holds four times the pages; blocks keep each KV head's rows together as bf16 ones do.
TEST(KvPagePool, Fp8PagesHoldTheSamePositionsInAQuarterOfTheBytes) {
  ModelConfig cfg = tiny_config();
  KvPagePool f32(cfg, 16, 0);
  KvPagePool fp8(cfg, 16, 0, false, KvDtype::kFp8);
  EXPECT_EQ(fp8.page_bytes(), f32.page_bytes() / 4);
  EXPECT_EQ(fp8.page_elements(), f32.page_elements());
  EXPECT_EQ(fp8.bytes_per_token_per_layer(), 2 * cfg.kv_dim());
  EXPECT_EQ(fp8.ring_pages(), f32.ring_pages());
  for (int64_t budget : {f32.page_bytes(), 5 * f32.page_bytes() + 1, int64_t{8 * 1024 * 1024 + 12345}}) {
    KvPagePool a(cfg, 16, budget);
    KvPagePool b(cfg, 16, budget, false, KvDtype::kFp8);
    EXPECT_EQ(b.max_pages(), budget / (f32.page_bytes() / 4));
    EXPECT_GE(b.max_pages(), 4 * a.max_pages());
    EXPECT_LE(b.bytes_allocated(), budget);
  }
  SequenceKv s(fp8);
  ASSERT_TRUE(s.reserve(40));
  EXPECT_EQ(s.ring_bytes(), cfg.num_sliding_layers() * (cfg.sliding_window - 1) * 2 * cfg.kv_dim());
  EXPECT_EQ(static_cast<char*>(s.full_keys(0, 1)) - static_cast<char*>(s.full_keys(0, 0)), cfg.head_dim);
  EXPECT_EQ(fp8.full_row_stride(), cfg.head_dim);
  EXPECT_EQ(fp8.full_head_stride(), 16 * cfg.head_dim);
  EXPECT_EQ(static_cast<char*>(s.full_values(0, 0)) - static_cast<char*>(s.full_keys(0, 0)),
            16 * cfg.kv_dim());
  EXPECT_EQ(static_cast<char*>(s.ring_keys(0, 1)) - static_cast<char*>(s.ring_keys(0, 0)), cfg.kv_dim());
}

// Resident memory follows use: nothing at construction, the pages written once they are written, never
// more than the budget, and freed pages are reused before untouched ones. (Prefaulted pools are measured
// through the engine in engine_test.cpp.)
TEST(KvPagePool, MemoryBecomesResidentAsPagesAreUsed) {
  ModelConfig cfg = tiny_config();
  const int64_t mib = 1024 * 1024, budget = 48 * mib;
  // Under ASan: one shadow byte per eight, plus what clang's sanitizer allocator adds (measured: 4-8%).
  const double shadow = kAddressSanitizer ? 1.0 / 4 : 0.0;
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

class AdoptPrefix : public ::testing::TestWithParam<KvDtype> {};

TEST_P(AdoptPrefix, SharesBlocksAndFillsTheRingFromCapturedSlidingBlocks) {
  ModelConfig cfg = tiny_config();  // window 32: the ring holds 31 entries, spread over blocks 1 and 2
  const KvDtype dt = GetParam();
  KvPagePool pool(cfg, 16, 0, false, dt);
  EXPECT_EQ(pool.slide_pages_per_block(), 3);  // 6 sliding layers, 2 per page
  SequenceKv a(pool);
  ASSERT_TRUE(a.reserve(48));
  std::vector<std::vector<int>> captured(3);
  for (int b = 0; b < 3; ++b) {
    std::vector<int> pages;
    for (int i = 0; i < pool.slide_pages_per_block(); ++i) pages.push_back(pool.allocate());
    a.set_capture(b, pages);
    captured[static_cast<size_t>(b)] = pages;
  }
  EXPECT_EQ(a.capture_keys(0, 48), nullptr);  // block 3 is not captured
  for (int64_t pos = 0; pos < 48; ++pos) {
    for (int l = 0; l < cfg.num_sliding_layers(); ++l) {
      // Exact in bf16 too (8 significant bits): 40 * l + pos < 256.
      put(dt, a.capture_keys(l, pos), static_cast<float>(40 * l + pos));
      put(dt, a.capture_values(l, pos), static_cast<float>(-40 * l - pos));
    }
  }
  put(dt, a.full_keys(1, 37), 2.5f);
  a.advance(48);
  std::vector<const int*> slide;
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(a.take_capture(b), captured[static_cast<size_t>(b)]);  // the caller owns them now
    slide.push_back(captured[static_cast<size_t>(b)].data());
  }
  EXPECT_FALSE(a.capturing(0));
  SequenceKv b(pool);
  ASSERT_TRUE(b.adopt_prefix(a.blocks(), slide));
  EXPECT_EQ(b.num_tokens(), 48);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b.blocks()[static_cast<size_t>(i)], a.blocks()[static_cast<size_t>(i)]);  // shared, not copied
    EXPECT_EQ(pool.refcount(a.blocks()[static_cast<size_t>(i)]), 2);
  }
  EXPECT_EQ(get(dt, b.full_keys(1, 37)), 2.5f);
  // The ring holds positions 17..47, the last window-1 before position 48, for every sliding layer.
  for (int64_t pos = 48 - (cfg.sliding_window - 1); pos < 48; ++pos) {
    for (int l = 0; l < cfg.num_sliding_layers(); ++l) {
      EXPECT_EQ(get(dt, b.ring_keys(l, pos)), static_cast<float>(40 * l + pos));
      EXPECT_EQ(get(dt, b.ring_values(l, pos)), static_cast<float>(-40 * l - pos));
    }
  }
  // Split over a pool (the engine's resume), the ring is filled the same; a sliding block missing inside
  // the window is refused before the sequence takes any reference or page.
  ThreadPool threads(3);
  SequenceKv c(pool);
  ASSERT_TRUE(c.adopt_prefix(a.blocks(), slide, &threads));
  for (int64_t pos = 48 - (cfg.sliding_window - 1); pos < 48; ++pos) {
    for (int l = 0; l < cfg.num_sliding_layers(); ++l) {
      EXPECT_EQ(get(dt, c.ring_keys(l, pos)), static_cast<float>(40 * l + pos));
      EXPECT_EQ(get(dt, c.ring_values(l, pos)), static_cast<float>(-40 * l - pos));
    }
  }
  c.clear();
  const int64_t in_use = pool.pages_in_use();
  std::vector<const int*> holed = slide;
  holed[1] = nullptr;  // positions 17..31 of the window
  SequenceKv d(pool);
  EXPECT_THROW(d.adopt_prefix(a.blocks(), holed, &threads), Error);
  EXPECT_EQ(pool.pages_in_use(), in_use);
  EXPECT_EQ(pool.refcount(a.blocks()[0]), 2);
  a.clear();
  b.clear();
  for (auto& pages : captured) {
    for (int p : pages) pool.release(p);
  }
  EXPECT_EQ(pool.pages_in_use(), 0);
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, AdoptPrefix,
                         ::testing::Values(KvDtype::kF32, KvDtype::kBf16, KvDtype::kFp8),
                         [](const ::testing::TestParamInfo<KvDtype>& i) {
                           return std::string(kv_dtype_name(i.param));
                         });

}  // namespace spark
