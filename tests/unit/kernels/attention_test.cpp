// Attention kernels of every instruction-set tier against the scalar reference, on keys laid out as the
// KV cache lays them out: paged blocks in scattered pages, a sliding ring that wraps, and the chunk's own
// rows inside wider qkv rows. Shapes cover group sizes 1 to 8, head sizes the AVX-512 body does not take
// (AVX2 only), decode (1 row) and prefill (rows across tiles and key blocks), windows and their edges;
// K/V stored as f32, as bf16 and as FP8 E4M3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_isa.h"
#include "kernel_test_util.h"
#include "util/fp8.h"
#include "util/half.h"

namespace spark::kernels {

namespace {

enum class Layout { kBlocks, kRing };

// One sequence: keys of positions 0 .. start + rows - 1 (the earlier ones stored as `layout`, the chunk's
// own in qkv-like rows), and the queries of the chunk's rows.
struct Sequence {
  std::vector<float> cache, own, q, out;
  std::vector<uint16_t> cache16, own16;  // bf16: the K/V the spans point at
  std::vector<uint8_t> cache8, own8;     // fp8: the same
  std::vector<KvSpan> spans;
  AttentionTask task;
};

struct Shape {
  int heads, kv_heads, head_dim;
};

// Re-points a span laid out over f32 `from` at the same elements of the bf16 or fp8 copy `to`.
template <class E>
const void* same_element(const void* p, const std::vector<float>& from, const std::vector<E>& to) {
  return to.data() + (static_cast<const float*>(p) - from.data());
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

std::vector<uint8_t> to_fp8(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_fp8_e4m3(v[i]);
  return out;
}

// x as the K/V cache of `dtype` would hold it.
float stored_value(float x, KvDtype dtype) {
  if (dtype == KvDtype::kBf16) return bf16_to_f32(f32_to_bf16(x));
  if (dtype == KvDtype::kFp8) return fp8_e4m3_to_f32(f32_to_fp8_e4m3(x));
  return x;
}

Sequence make_sequence(const Shape& sh, Layout layout, int64_t start, int64_t rows, int64_t window,
                       float q_sigma, std::mt19937& rng, KvDtype dtype = KvDtype::kF32) {
  const int kv_dim = sh.kv_heads * sh.head_dim, q_dim = sh.heads * sh.head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim + 3;  // wider than K + V, as the model's qkv rows are
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Sequence s;
  const int64_t lo = window > 0 ? std::max<int64_t>(0, start - window + 1) : 0;
  if (layout == Layout::kBlocks) {
    // Blocks of 16 positions in shuffled pages, laid out as the KV cache's full layers are: each page is
    // [K | V] of its block, each of them [KV head][position][head_dim] (a span's head_stride).
    constexpr int64_t bs = 16;
    const int64_t blocks = (start + bs - 1) / bs;
    std::vector<int64_t> page(static_cast<size_t>(blocks));
    std::iota(page.begin(), page.end(), 0);
    std::shuffle(page.begin(), page.end(), rng);
    s.cache.resize(static_cast<size_t>(std::max<int64_t>(1, blocks) * 2 * bs * kv_dim));
    for (float& f : s.cache) f = dist(rng);
    for (int64_t p = lo; p < start;) {
      const int64_t b = p / bs, n = std::min(bs - p % bs, start - p);
      const float* base = s.cache.data() + page[static_cast<size_t>(b)] * 2 * bs * kv_dim;
      s.spans.push_back({p, n, base + (p % bs) * sh.head_dim, base + bs * kv_dim + (p % bs) * sh.head_dim,
                         sh.head_dim, bs * sh.head_dim});
      p += n;
    }
  } else {
    // A ring of window - 1 entries: position p in entry p % cap, K entries then V entries.
    const int64_t cap = window - 1;
    s.cache.resize(static_cast<size_t>(std::max<int64_t>(1, cap) * 2 * kv_dim));
    for (float& f : s.cache) f = dist(rng);
    for (int64_t p = lo; p < start;) {
      const int64_t e = p % cap, n = std::min(cap - e, start - p);
      s.spans.push_back({p, n, s.cache.data() + e * kv_dim, s.cache.data() + (cap + e) * kv_dim, kv_dim});
      p += n;
    }
  }
  s.own.resize(static_cast<size_t>(rows * qkv_dim));
  for (float& f : s.own) f = dist(rng);
  s.spans.push_back({start, rows, s.own.data() + q_dim, s.own.data() + q_dim + kv_dim, qkv_dim});
  // Queries live in the same rows as the chunk's keys, as in the model.
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < q_dim; ++i) s.own[static_cast<size_t>(r * qkv_dim + i)] *= q_sigma;
  }
  s.out.assign(static_cast<size_t>(rows * q_dim), 0.0f);
  s.task.q = s.own.data();
  s.task.q_stride = qkv_dim;
  s.task.out = s.out.data();
  s.task.out_stride = q_dim;
  s.task.rows = rows;
  s.task.first_pos = start;
  s.task.window = window;
  // bf16 or fp8: the same K/V rounded, in the same layout (the own rows keep their qkv stride).
  const auto repoint = [&s, start](const auto& cache, const auto& own) {
    for (KvSpan& sp : s.spans) {
      const bool is_own = sp.pos == start;
      sp.k = is_own ? same_element(sp.k, s.own, own) : same_element(sp.k, s.cache, cache);
      sp.v = is_own ? same_element(sp.v, s.own, own) : same_element(sp.v, s.cache, cache);
    }
  };
  if (dtype == KvDtype::kBf16) {
    s.cache16 = to_bf16(s.cache);
    s.own16 = to_bf16(s.own);
    repoint(s.cache16, s.own16);
  } else if (dtype == KvDtype::kFp8) {
    s.cache8 = to_fp8(s.cache);
    s.own8 = to_fp8(s.own);
    repoint(s.cache8, s.own8);
  }
  s.task.kv_dtype = dtype;
  s.task.kv = s.spans;
  return s;
}

struct Case {
  Shape shape;
  Layout layout;
  int64_t start, rows, window;
  float q_sigma;
};

std::string describe(const Case& c) {
  return std::to_string(c.shape.heads) + "/" + std::to_string(c.shape.kv_heads) + " heads, head_dim " +
         std::to_string(c.shape.head_dim) + (c.layout == Layout::kRing ? ", ring" : ", blocks") + ", start " +
         std::to_string(c.start) + ", rows " + std::to_string(c.rows) + ", window " +
         std::to_string(c.window);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Groups of 4 (the model's), 1, 8, 3, 2 and 16: decode packs 2 to 16 queries into a vector's lanes
  // where they divide it, and keeps one query to a lane otherwise.
  const Shape shapes[] = {{8, 2, 256}, {4, 4, 64},  {8, 1, 32}, {6, 2, 80},
                          {4, 2, 48},  {16, 2, 16}, {16, 1, 32}};
  // (start, rows): decode at, around and far past block (16), key-block (64) and tile boundaries;
  // prefill chunks from position 0, straddling blocks, and longer than a tile.
  const std::pair<int64_t, int64_t> spans[] = {{0, 1},  {63, 1},  {64, 1},  {65, 1},  {300, 1},
                                               {0, 37}, {13, 50}, {64, 70}, {127, 3}, {200, 130}};
  for (const Shape& sh : shapes) {
    for (auto [start, rows] : spans) {
      v.push_back({sh, Layout::kBlocks, start, rows, 0, 1.0f});
      for (int64_t window : {2, 17, 64, 100}) v.push_back({sh, Layout::kRing, start, rows, window, 1.0f});
    }
    // Decode rows long enough to be split across key ranges (parts of 512 keys, each part's KV heads
    // on one thread), then merged: two parts for every shape, many for two (the reference is slow over
    // thousands of keys).
    v.push_back({sh, Layout::kBlocks, 700, 1, 0, 1.0f});
    if (sh.head_dim == 256) v.push_back({sh, Layout::kBlocks, 2500, 1, 0, 1.0f});
    if (sh.head_dim == 64) v.push_back({sh, Layout::kBlocks, 4097, 1, 0, 4.0f});
    // Peaked softmax (large scores), long context.
    v.push_back({sh, Layout::kBlocks, 700, 5, 0, 4.0f});
    v.push_back({sh, Layout::kRing, 700, 20, 130, 4.0f});
  }
  return v;
}

using AttentionFn = void (*)(const AttentionShape&, std::span<const AttentionTask>, ThreadPool&);

// Tolerance (absolute): outputs are convex combinations of N(0, 1) values; the vector bodies form scores
// in f32 over head_dim and sum over up to ~800 keys in f32 where the reference uses doubles. With queries
// scaled x4 (scores of tens, a peaked softmax) a score's f32 rounding moves its weight more; measured worst
// 1.1e-5 there (head_dim 256, 700 keys) and 3.1e-6 otherwise (head_dim 256, window 2).
float tolerance(const Case& c) {
  return c.q_sigma > 1.0f ? 3e-5f : 5e-6f;
}

// bf16 and fp8 K/V: the kernels widen them exactly, so against the reference on the same values the error
// is that of the f32 path, and the same tolerance holds.
void check_against_reference(AttentionFn fn, bool (*supports)(int), const char* label,
                             KvDtype dtype = KvDtype::kF32) {
  std::mt19937 rng(4321);
  ThreadPool pool(3);
  int checked = 0;
  for (const Case& c : cases()) {
    if (!supports(c.shape.head_dim)) continue;
    SCOPED_TRACE(std::string(label) + ": " + describe(c));
    // Two sequences in one call, as the model batches a step's chunks.
    Sequence a = make_sequence(c.shape, c.layout, c.start, c.rows, c.window, c.q_sigma, rng, dtype);
    Sequence b =
        make_sequence(c.shape, c.layout, c.start / 2 + 1, c.rows / 2 + 1, c.window, c.q_sigma, rng, dtype);
    const AttentionShape shape{c.shape.heads, c.shape.kv_heads, c.shape.head_dim,
                               1.0f / std::sqrt(static_cast<float>(c.shape.head_dim))};
    const AttentionTask tasks[] = {a.task, b.task};
    fn(shape, std::span<const AttentionTask>(tasks), pool);
    for (Sequence* s : {&a, &b}) {
      std::vector<float> want(s->out.size());
      AttentionTask t = s->task;
      t.out = want.data();
      attention_ref(shape, t);
      float worst = 0.0f;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(s->out[i] - want[i]));
      EXPECT_LE(worst, tolerance(c));
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

bool any_head_dim(int head_dim) {
  return head_dim > 0;
}

// Every body against the reference, for each K/V element type.
class AttentionMatchesReference : public ::testing::TestWithParam<KvDtype> {};

TEST_P(AttentionMatchesReference, Dispatch) {
  const std::string label = std::string("dispatch ") + kv_dtype_name(GetParam());
  check_against_reference(attention, any_head_dim, label.c_str(), GetParam());
}

TEST_P(AttentionMatchesReference, Avx2) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx2);
  const std::string label = std::string("avx2 ") + kv_dtype_name(GetParam());
  check_against_reference(attention_avx2, attention_avx2_supports, label.c_str(), GetParam());
}

TEST_P(AttentionMatchesReference, Avx512) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx512);
  const std::string label = std::string("avx512 ") + kv_dtype_name(GetParam());
  check_against_reference(attention_avx512, attention_avx512_supports, label.c_str(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, AttentionMatchesReference,
                         ::testing::Values(KvDtype::kF32, KvDtype::kBf16, KvDtype::kFp8),
                         [](const ::testing::TestParamInfo<KvDtype>& i) {
                           return std::string(kv_dtype_name(i.param));
                         });

// The reference reads bf16 and fp8 rows as the values they hold: on K/V that are exactly such values its
// output equals (bit for bit) its output on the same values stored as f32, and on K/V that are not, the
// output differs by about what the format's mantissa implies (8 bits for bf16, 4 for fp8).
void reference_reads_the_rounded_values(KvDtype dtype, float least, float most) {
  std::mt19937 rng(7);
  const Shape sh{8, 2, 64};
  const AttentionShape shape{sh.heads, sh.kv_heads, sh.head_dim, 0.125f};
  Sequence f = make_sequence(sh, Layout::kBlocks, 100, 3, 0, 1.0f, rng);
  std::mt19937 rng2(7);
  Sequence b = make_sequence(sh, Layout::kBlocks, 100, 3, 0, 1.0f, rng2, dtype);
  attention_ref(shape, f.task);
  attention_ref(shape, b.task);
  float worst = 0.0f;
  for (size_t i = 0; i < f.out.size(); ++i) worst = std::max(worst, std::fabs(f.out[i] - b.out[i]));
  EXPECT_GT(worst, least);
  EXPECT_LT(worst, most);
  // Now round the f32 copy to the stored values: the two must agree exactly.
  for (float& x : f.cache) x = stored_value(x, dtype);
  for (size_t r = 0; r < 3; ++r) {
    for (int i = sh.heads * sh.head_dim; i < static_cast<int>(f.task.q_stride); ++i) {
      float& x = f.own[r * static_cast<size_t>(f.task.q_stride) + static_cast<size_t>(i)];
      x = stored_value(x, dtype);
    }
  }
  attention_ref(shape, f.task);
  EXPECT_EQ(f.out, b.out);
}

TEST(Attention, Bf16ReferenceReadsTheRoundedValues) {
  reference_reads_the_rounded_values(KvDtype::kBf16, 1e-4f, 5e-2f);
}

TEST(Attention, Fp8ReferenceReadsTheRoundedValues) {
  reference_reads_the_rounded_values(KvDtype::kFp8, 2e-3f, 0.5f);
}

// The vector bodies widen fp8 elements exactly, so on fp8 K/V they must give bit for bit what they give on
// f32 K/V holding the same values: decode (split and not) and prefill rows, blocks and rings.
TEST(Attention, Fp8RowsEqualF32RowsOnTheSameValues) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx2);
  ThreadPool pool(3);
  const Shape sh{8, 2, 64};
  const AttentionShape shape{sh.heads, sh.kv_heads, sh.head_dim, 0.125f};
  struct Body {
    AttentionFn fn;
    Isa isa;
  };
  for (const Body& body : {Body{attention_avx2, Isa::kAvx2}, Body{attention_avx512, Isa::kAvx512}}) {
    if (!cpu_supports(body.isa)) continue;
    // (start, rows, window): decode whole and split, prefill, on blocks and on a ring.
    const std::tuple<int64_t, int64_t, int64_t> cases[] = {
        {300, 1, 0}, {1500, 1, 0}, {150, 70, 0}, {150, 70, 40}, {90, 1, 40}};
    for (auto [start, rows, window] : cases) {
      SCOPED_TRACE(std::string(isa_name(body.isa)) + " start " + std::to_string(start) + " rows " +
                   std::to_string(rows) + " window " + std::to_string(window));
      const Layout layout = window > 0 ? Layout::kRing : Layout::kBlocks;
      std::mt19937 rng(5), rng2(5);
      Sequence f = make_sequence(sh, layout, start, rows, window, 2.0f, rng);
      Sequence b = make_sequence(sh, layout, start, rows, window, 2.0f, rng2, KvDtype::kFp8);
      for (float& x : f.cache) x = stored_value(x, KvDtype::kFp8);
      for (int64_t r = 0; r < rows; ++r) {
        for (int i = sh.heads * sh.head_dim; i < static_cast<int>(f.task.q_stride); ++i) {
          float& x = f.own[static_cast<size_t>(r * f.task.q_stride + i)];
          x = stored_value(x, KvDtype::kFp8);
        }
      }
      body.fn(shape, std::span<const AttentionTask>(&f.task, 1), pool);
      body.fn(shape, std::span<const AttentionTask>(&b.task, 1), pool);
      EXPECT_EQ(b.out, f.out);
    }
  }
}

// What the forward pass's chunking and prefix-cache tests rely on: a row's output is bit-identical
// however the rows are cut into tasks (decode one by one, or one prefill) and however many threads run
// them; and the AVX2 and AVX-512 bodies give the same bits.
TEST(Attention, RowsDoNotDependOnChunkingThreadsOrTier) {
  SPARK_SKIP_UNLESS_CPU_SUPPORTS(Isa::kAvx2);
  std::mt19937 rng(99);
  ThreadPool pool1(1), pool3(3);
  const Shape sh{8, 2, 64};
  for (int64_t window : {int64_t{0}, int64_t{40}, int64_t{-1}, int64_t{-2}}) {
    // window -1: full attention with bf16 K/V; -2: with fp8 K/V.
    const KvDtype dtype = window == -1 ? KvDtype::kBf16 : window == -2 ? KvDtype::kFp8 : KvDtype::kF32;
    window = std::max<int64_t>(window, 0);
    SCOPED_TRACE("window " + std::to_string(window) + " kv " + std::to_string(static_cast<int>(dtype)));
    const Layout layout = window > 0 ? Layout::kRing : Layout::kBlocks;
    Sequence s = make_sequence(sh, layout, 150, 90, window, 2.0f, rng, dtype);
    const AttentionShape shape{sh.heads, sh.kv_heads, sh.head_dim, 0.125f};
    const AttentionTask whole[] = {s.task};
    attention_avx2(shape, std::span<const AttentionTask>(whole), pool3);
    const std::vector<float> one_call = s.out;
    // Row by row (as decode steps would), each task's rows starting at its own position.
    std::vector<AttentionTask> singles;
    for (int64_t r = 0; r < s.task.rows; r += 7) {
      AttentionTask t = s.task;
      t.q += r * t.q_stride;
      t.out += r * t.out_stride;
      t.first_pos += r;
      t.rows = std::min<int64_t>(7, s.task.rows - r);
      singles.push_back(t);
    }
    std::fill(s.out.begin(), s.out.end(), 0.0f);
    attention_avx2(shape, singles, pool1);
    EXPECT_EQ(s.out, one_call) << "cutting the rows into tasks changed the output";
    if (cpu_supports(Isa::kAvx512)) {
      std::fill(s.out.begin(), s.out.end(), 0.0f);
      attention_avx512(shape, std::span<const AttentionTask>(whole), pool1);
      EXPECT_EQ(s.out, one_call) << "AVX-512 and AVX2 differ";
    }
  }
}

}  // namespace

}  // namespace spark::kernels
