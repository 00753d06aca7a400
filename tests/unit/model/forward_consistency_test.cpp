// Internal consistency of the forward pass: however a sequence is cut into chunks, and whatever other
// sequences share its step, it must produce the same logits. (Agreement with the independent numpy
// reference is tests/golden/forward_vs_reference_test.py.) Every K/V cache element type: f32, bf16, fp8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "model/spark_model.h"
#include "model/synthetic_checkpoint.h"
#include "spark/error.h"

namespace spark {

namespace {

namespace fs = std::filesystem;

class ForwardConsistency : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("spark-forward-test-" + std::to_string(::getpid())));
    write_synthetic_checkpoint({builtin_config("tiny"), 11, "BF16", 1, {}}, *dir_);
    checkpoint_ = new std::shared_ptr<const Checkpoint>(std::make_shared<const Checkpoint>(*dir_));
  }
  static void TearDownTestSuite() {
    delete checkpoint_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  // Runs `tokens` through a fresh sequence in chunks of `chunk` and returns every position's logits.
  std::vector<float> run(const std::vector<int32_t>& tokens, int64_t chunk, int64_t* ring_bytes = nullptr,
                         int64_t* blocks = nullptr, KvDtype dtype = KvDtype::kF32) {
    SparkModel model(*checkpoint_, 1024);
    const ModelConfig& cfg = model.config();
    KvPagePool pool(cfg, 16, 0, false, dtype);
    SequenceKv kv(pool);
    std::vector<float> all, step;
    for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(chunk)) {
      int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(tokens.size() - i));
      EXPECT_TRUE(kv.reserve(kv.num_tokens() + n));
      SequenceChunk c{&kv, tokens.data() + i, n, LogitsMode::kAll};
      model.forward(std::span<const SequenceChunk>(&c, 1), step, pool_);
      all.insert(all.end(), step.begin(), step.end());
    }
    if (ring_bytes) *ring_bytes = kv.ring_bytes();
    if (blocks) *blocks = static_cast<int64_t>(kv.blocks().size());
    return all;
  }

  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(14, 900);
    std::vector<int32_t> t(n);
    for (auto& v : t) v = dist(rng);
    return t;
  }

  // max |a - b| relative to max |b|.
  static float relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      max_abs = std::max(max_abs, std::fabs(b[i]));
      max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    }
    return max_diff / max_abs;
  }

  // f32 KV: chunking changes only the last bits of K and V. bf16 KV: those last bits can move a K or V
  // element across a bf16 rounding boundary (one bf16 step, 2^-8 relative), so the logits agree to that
  // rounding's effect instead (measured 7.7e-4 on tiny, chunks of 1 against one 150-token prefill).
  // fp8 KV: the same with one fp8 step (2^-4 relative) per crossing (measured 4.3e-3, chunks of 1).
  static float chunking_tolerance(KvDtype dt) {
    return dt == KvDtype::kBf16 ? 3e-3f : dt == KvDtype::kFp8 ? 2e-2f : 1e-5f;
  }

  static void expect_close(const std::vector<float>& a, const std::vector<float>& b,
                           KvDtype dt = KvDtype::kF32) {
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LE(relative_diff(a, b), chunking_tolerance(dt));
  }

  void chunking_case(KvDtype dtype);
  void resume_case(KvDtype dtype);

  static fs::path* dir_;
  static std::shared_ptr<const Checkpoint>* checkpoint_;
  ThreadPool pool_{2};
};

fs::path* ForwardConsistency::dir_ = nullptr;
std::shared_ptr<const Checkpoint>* ForwardConsistency::checkpoint_ = nullptr;

}  // namespace

void ForwardConsistency::chunking_case(KvDtype dt) {
  const auto tokens = random_tokens(150, 1);  // window is 32: crosses it several times
  const auto whole = run(tokens, 150, nullptr, nullptr, dt);
  expect_close(run(tokens, 1, nullptr, nullptr, dt), whole, dt);
  expect_close(run(tokens, 5, nullptr, nullptr, dt), whole, dt);
  expect_close(run(tokens, 31, nullptr, nullptr, dt), whole, dt);
  expect_close(run(tokens, 33, nullptr, nullptr, dt), whole, dt);
}

TEST_F(ForwardConsistency, ChunkingDoesNotChangeLogits) {
  chunking_case(KvDtype::kF32);
}

TEST_F(ForwardConsistency, ChunkingDoesNotChangeLogitsWithBf16Kv) {
  chunking_case(KvDtype::kBf16);
}

TEST_F(ForwardConsistency, ChunkingDoesNotChangeLogitsWithFp8Kv) {
  chunking_case(KvDtype::kFp8);
}

// bf16 K/V are used (the logits move) and move them little: rounding K and V to 8 significant bits.
// (Against the reference with bf16-rounded K/V: tests/golden/forward_vs_reference_test.py.)
TEST_F(ForwardConsistency, Bf16KvLogitsStayCloseToF32) {
  const auto tokens = random_tokens(100, 6);
  const float rel = relative_diff(run(tokens, 13, nullptr, nullptr, KvDtype::kBf16), run(tokens, 13));
  EXPECT_GT(rel, 1e-6f);
  EXPECT_LT(rel, 2e-2f);
}

// fp8 K/V (4 significant bits) move the logits more than bf16 does, and less than a bound (measured
// FP8_F32_MEASURED on this random model).
TEST_F(ForwardConsistency, Fp8KvLogitsStayCloseToF32) {
  const auto tokens = random_tokens(100, 6);
  const auto f32 = run(tokens, 13);
  const float rel8 = relative_diff(run(tokens, 13, nullptr, nullptr, KvDtype::kFp8), f32);
  const float rel16 = relative_diff(run(tokens, 13, nullptr, nullptr, KvDtype::kBf16), f32);
  std::printf("fp8 KV vs f32: %.3g, bf16 KV vs f32: %.3g\n", rel8, rel16);
  EXPECT_GT(rel8, 2 * rel16);
  EXPECT_LT(rel8, 0.2f);
}

TEST_F(ForwardConsistency, BatchedStepEqualsSeparateSteps) {
  SparkModel model(*checkpoint_, 1024);
  const ModelConfig& cfg = model.config();
  KvPagePool pool(cfg, 16, 0);
  const auto a = random_tokens(70, 2), b = random_tokens(9, 3);
  SequenceKv ka(pool), kb(pool);
  ASSERT_TRUE(ka.reserve(70));
  ASSERT_TRUE(kb.reserve(9));
  SequenceChunk chunks[2] = {{&ka, a.data(), 70, LogitsMode::kAll}, {&kb, b.data(), 9, LogitsMode::kLast}};
  std::vector<float> batched;
  model.forward(std::span<const SequenceChunk>(chunks, 2), batched, pool_);
  const size_t vocab = static_cast<size_t>(cfg.vocab_size);
  ASSERT_EQ(batched.size(), (70 + 1) * vocab);
  expect_close(std::vector<float>(batched.begin(), batched.begin() + 70 * vocab), run(a, 70));
  const auto alone_b = run(b, 9);
  expect_close(std::vector<float>(batched.begin() + 70 * vocab, batched.end()),
               std::vector<float>(alone_b.end() - vocab, alone_b.end()));
}

TEST_F(ForwardConsistency, SlidingMemoryStaysAtTheRingAfterFiveWindows) {
  const ModelConfig& cfg = (*checkpoint_)->config();
  const int64_t n = 5 * cfg.sliding_window;
  int64_t ring_bytes = 0, blocks = 0;
  run(random_tokens(static_cast<size_t>(n), 4), 7, &ring_bytes, &blocks);
  EXPECT_EQ(ring_bytes, static_cast<int64_t>(cfg.num_sliding_layers()) * (cfg.sliding_window - 1) * 2 *
                            cfg.kv_dim() * static_cast<int64_t>(sizeof(float)));
  EXPECT_EQ(blocks, (n + 15) / 16);  // only full layers grow with the sequence
}

// The prefix cache's resume: a second sequence that shares a block-aligned prefix takes the first one's
// full-layer blocks and fills its rings from the sliding blocks captured while the first was computed.
// Its logits for what follows must be those of the first sequence, bit for bit, whether the prefix is
// shorter than the sliding window, as long, or many windows long, and however the prefix was chunked.
void ForwardConsistency::resume_case(KvDtype dt) {
  SparkModel model(*checkpoint_, 1024);
  const ModelConfig& cfg = model.config();
  const int window = cfg.sliding_window;
  KvPagePool pool(cfg, 16, 0, false, dt);
  for (int prefix : {window / 2, window, 3 * window, 10 * window}) {
    for (int64_t chunk : {int64_t{7}, int64_t{64}, int64_t{prefix}}) {
      SCOPED_TRACE("prefix " + std::to_string(prefix) + ", chunk " + std::to_string(chunk));
      const auto tokens = random_tokens(static_cast<size_t>(prefix) + 20, static_cast<uint32_t>(prefix));
      const int64_t blocks = prefix / 16;
      std::vector<float> want, got;
      std::vector<std::vector<int>> captured(static_cast<size_t>(blocks));
      {
        SequenceKv a(pool);
        for (int64_t b = 0; b < blocks; ++b) {
          std::vector<int> pages;
          for (int i = 0; i < pool.slide_pages_per_block(); ++i) pages.push_back(pool.allocate());
          a.set_capture(b, pages);
        }
        for (int64_t i = 0; i < prefix; i += chunk) {
          const int64_t n = std::min<int64_t>(chunk, prefix - i);
          ASSERT_TRUE(a.reserve(i + n));
          SequenceChunk c{&a, tokens.data() + i, n, LogitsMode::kNone};
          model.forward(std::span<const SequenceChunk>(&c, 1), want, pool_);
        }
        for (int64_t b = 0; b < blocks; ++b) captured[static_cast<size_t>(b)] = a.take_capture(b);
        SequenceKv resumed(pool);
        std::vector<const int*> slide;
        for (const auto& pages : captured) slide.push_back(pages.data());
        ASSERT_TRUE(resumed.adopt_prefix(a.blocks(), slide));
        ASSERT_TRUE(a.reserve(prefix + 20));
        ASSERT_TRUE(resumed.reserve(prefix + 20));
        SequenceChunk first{&a, tokens.data() + prefix, 20, LogitsMode::kAll};
        model.forward(std::span<const SequenceChunk>(&first, 1), want, pool_);
        SequenceChunk second{&resumed, tokens.data() + prefix, 20, LogitsMode::kAll};
        model.forward(std::span<const SequenceChunk>(&second, 1), got, pool_);
      }
      // And against a sequence computed from scratch with no reuse at all (chunking tolerance).
      const auto scratch = run(tokens, 1000, nullptr, nullptr, dt);
      expect_close(got,
                   std::vector<float>(scratch.end() - static_cast<std::ptrdiff_t>(got.size()), scratch.end()),
                   dt);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "reuse changed the logits";
      for (auto& pages : captured) {
        for (int p : pages) pool.release(p);
      }
      EXPECT_EQ(pool.pages_in_use(), 0);
    }
  }
}

TEST_F(ForwardConsistency, ResumingFromCapturedBlocksGivesIdenticalLogits) {
  resume_case(KvDtype::kF32);
}

TEST_F(ForwardConsistency, ResumingFromCapturedBlocksGivesIdenticalLogitsWithBf16Kv) {
  resume_case(KvDtype::kBf16);
}

TEST_F(ForwardConsistency, ResumingFromCapturedBlocksGivesIdenticalLogitsWithFp8Kv) {
  resume_case(KvDtype::kFp8);
}

TEST_F(ForwardConsistency, RejectsPositionsPastMaxModelLenAndBadTokenIds) {
  SparkModel model(*checkpoint_, 8);
  const ModelConfig& cfg = model.config();
  KvPagePool pool(cfg, 16, 0);
  SequenceKv kv(pool);
  ASSERT_TRUE(kv.reserve(16));
  std::vector<float> logits;
  auto tokens = random_tokens(9, 5);
  SequenceChunk too_long{&kv, tokens.data(), 9, LogitsMode::kLast};
  EXPECT_THROW(model.forward(std::span<const SequenceChunk>(&too_long, 1), logits, pool_), Error);
  tokens[0] = cfg.vocab_size;
  SequenceChunk bad_id{&kv, tokens.data(), 2, LogitsMode::kLast};
  EXPECT_THROW(model.forward(std::span<const SequenceChunk>(&bad_id, 1), logits, pool_), Error);
  EXPECT_EQ(kv.num_tokens(), 0);  // a rejected step leaves the sequence untouched
}

}  // namespace spark
