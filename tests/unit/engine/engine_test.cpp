// The engine's promises: batching, prefix reuse and preemption never change what a request produces;
// the KV budget is exact; cancellation and the queue cap take effect promptly.
#include "spark/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "model/spark_model.h"
#include "model/synthetic_checkpoint.h"
#include "util/process_memory.h"

namespace spark {

namespace {

namespace fs = std::filesystem;

struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason reason = FinishReason::kNone;
  int64_t computed_prompt = 0;
};

// Holds the engine inside a step, so a test decides what the engine sees next instead of racing its thread.
// A request carrying a Gate samples a token every step it is in, and every such step calls prepare() first:
// prepare() calls beyond the allowed count wait there (for at most a minute, so that a broken engine fails
// the test rather than hanging it), and the step cannot end before they return.
class Gate : public LogitsProcessor {
 public:
  explicit Gate(int allowed) : allowed_(allowed) {}
  void prepare() override {
    std::unique_lock<std::mutex> lock(mu_);
    const int call = entered_++;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return call < allowed_; });
  }
  void process(std::span<float>) override {}
  void accept(int32_t) override {}
  // Lets `steps` more steps through; open() lets every later one through.
  void allow(int steps) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      allowed_ += steps;
    }
    cv_.notify_all();
  }
  void open() { allow(std::numeric_limits<int>::max() / 2); }
  // Waits until the engine has entered prepare() `calls` times (the last of them may be waiting now).
  bool wait_entered(int calls) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return entered_ >= calls; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int allowed_;
  int entered_ = 0;
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("spark-engine-test-" + std::to_string(::getpid())));
    write_synthetic_checkpoint({builtin_config("tiny"), 21, "BF16", 1, {}}, *dir_);
    model_ = new std::shared_ptr<SparkModel>(
        std::make_shared<SparkModel>(std::make_shared<const Checkpoint>(*dir_), 1024));
  }
  static void TearDownTestSuite() {
    delete model_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static int64_t page_bytes() {
    KvPagePool probe((*model_)->config(), 16, 0);
    return probe.page_bytes();
  }
  static int64_t ring_pages() {
    KvPagePool probe((*model_)->config(), 16, 0);
    return probe.ring_pages();
  }

  static EngineOptions options(int64_t budget_pages, bool caching) {
    EngineOptions o;
    o.kv_cache_memory_bytes = budget_pages * page_bytes();
    o.enable_prefix_caching = caching;
    o.threads = 2;
    o.max_num_batched_tokens = 64;
    return o;
  }

  static GenerationRequest greedy(std::vector<int32_t> prompt, int max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.logprobs = 0;
    return r;
  }

  static Result collect(RequestHandle& h) {
    Result r;
    std::vector<TokenEvent> events;
    while (!h.wait(events, std::chrono::milliseconds(200))) {
    }
    for (auto& e : events) {
      r.tokens.push_back(e.token);
      r.logprobs.push_back(e.logprob);
    }
    r.reason = h.reason();
    r.computed_prompt = h.computed_prompt_tokens();
    return r;
  }

  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(14, 900);
    std::vector<int32_t> t(n);
    for (auto& v : t) v = dist(rng);
    return t;
  }

  // Submits every request while the engine is held inside the first step of a gated request, then cancels
  // that one: the engine takes them all into one step, however this thread and the engine's are scheduled
  // (submitted one after another, a descheduled submitter would let the first ones run alone).
  static std::vector<std::shared_ptr<RequestHandle>> submit_together(
      Engine& engine, std::vector<GenerationRequest> requests) {
    auto gate = std::make_shared<Gate>(0);
    GenerationRequest hold = greedy(random_tokens(1, 99), 4);
    hold.processor = gate;
    auto held = engine.submit(std::move(hold));
    EXPECT_TRUE(gate->wait_entered(1));
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (auto& r : requests) handles.push_back(engine.submit(std::move(r)));
    held->cancel();
    gate->open();
    return handles;
  }

  // Each prompt run alone through an engine with nothing else in it and no cache.
  static std::vector<Result> run_alone(const std::vector<std::vector<int32_t>>& prompts, int max_tokens) {
    Engine engine(*model_, options(4096, false));
    std::vector<Result> out;
    for (const auto& p : prompts) out.push_back(collect(*engine.submit(greedy(p, max_tokens))));
    return out;
  }

  // rel_tol 0: the same floats.
  static void expect_same(const std::vector<Result>& got, const std::vector<Result>& want,
                          float rel_tol = 1e-4f) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
      for (size_t j = 0; j < got[i].logprobs.size(); ++j) {
        EXPECT_NEAR(got[i].logprobs[j], want[i].logprobs[j],
                    rel_tol * std::max(1.0f, std::fabs(want[i].logprobs[j])))
            << "request " << i << " token " << j;
      }
    }
  }

  static fs::path* dir_;
  static std::shared_ptr<SparkModel>* model_;

  void narrow_kv_case(const std::string& dtype, int64_t shrink);
};

fs::path* EngineTest::dir_ = nullptr;
std::shared_ptr<SparkModel>* EngineTest::model_ = nullptr;

std::vector<std::vector<int32_t>> sixteen_prompts() {
  std::vector<std::vector<int32_t>> prompts;
  const size_t lengths[16] = {1, 2, 5, 9, 16, 17, 31, 32, 33, 48, 64, 100, 150, 200, 257, 300};
  for (size_t i = 0; i < 16; ++i) {
    std::mt19937 rng(static_cast<uint32_t>(100 + i));
    std::uniform_int_distribution<int32_t> dist(14, 900);
    std::vector<int32_t> p(lengths[i]);
    for (auto& v : p) v = dist(rng);
    prompts.push_back(p);
  }
  return prompts;
}

}  // namespace

TEST_F(EngineTest, ConcurrentRequestsProduceWhatEachProducesAlone) {
  const auto prompts = sixteen_prompts();
  const auto alone = run_alone(prompts, 24);
  Engine engine(*model_, options(4096, false));
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& p : prompts) handles.push_back(engine.submit(greedy(p, 24)));
  std::vector<Result> batched;
  for (auto& h : handles) batched.push_back(collect(*h));
  expect_same(batched, alone);
  for (const auto& r : batched) EXPECT_EQ(r.reason, FinishReason::kLength);
  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.steps, 0);
  // The sampling phase is timed inside the step's own time.
  EXPECT_GT(stats.sampling_ns, 0);
  EXPECT_LT(stats.sampling_ns, stats.step_ns);
}

TEST_F(EngineTest, PrefixCacheHitsDoNotChangeResults) {
  const auto prompts = sixteen_prompts();
  // Prompts that share a long common head, submitted after one request has left it in the cache.
  std::vector<std::vector<int32_t>> shared;
  const auto head = random_tokens(90, 7);
  for (const auto& p : prompts) {
    auto q = head;
    q.insert(q.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(p.size(), 40)));
    shared.push_back(q);
  }
  const auto alone = run_alone(shared, 16);
  Engine engine(*model_, options(4096, true));
  collect(*engine.submit(greedy(head, 4)));
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& p : shared) handles.push_back(engine.submit(greedy(p, 16)));
  std::vector<Result> batched;
  for (auto& h : handles) batched.push_back(collect(*h));
  expect_same(batched, alone);
  EXPECT_GE(engine.stats().prefix_cache_hits, 16);
  // Reuse is block-granular: the 5 complete blocks of the 90-token head, at least, for each.
  EXPECT_GE(engine.stats().prefix_cache_hit_tokens, 16 * 80);
}

TEST_F(EngineTest, PreemptionUnderATinyBudgetDoesNotChangeResults) {
  const auto prompts = sixteen_prompts();
  const auto alone = run_alone(prompts, 24);
  // Room for the longest request and a little more: sequences must be preempted and recomputed.
  const int64_t pages = 2 * ring_pages() + (300 + 24) / 16 + 4;
  Engine engine(*model_, options(pages, false));
  std::vector<GenerationRequest> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, 24));
  const auto handles = submit_together(engine, std::move(requests));
  std::vector<Result> batched;
  for (auto& h : handles) batched.push_back(collect(*h));
  expect_same(batched, alone);
  EXPECT_GT(engine.stats().preemptions, 0);
}

TEST_F(EngineTest, SecondTurnReusesTheWholeFirstTurn) {
  Engine engine(*model_, options(4096, true));
  const auto turn1 = random_tokens(100, 8);
  Result r1 = collect(*engine.submit(greedy(turn1, 20)));
  ASSERT_EQ(r1.tokens.size(), 20u);
  EXPECT_EQ(r1.computed_prompt, 100);
  // The agent resends the conversation: first prompt, the reply, then a new message.
  auto turn2 = turn1;
  turn2.insert(turn2.end(), r1.tokens.begin(), r1.tokens.end());
  const auto user = random_tokens(30, 9);
  turn2.insert(turn2.end(), user.begin(), user.end());
  auto h2 = engine.submit(greedy(turn2, 12));
  Result r2 = collect(*h2);
  // The first turn ran its 100 prompt tokens + 19 generated ones through the model (the last sampled
  // token never was); every complete block of those 119 is reused.
  const int64_t cached = (100 + 20 - 1) / 16 * 16;
  EXPECT_EQ(h2->cached_prompt_tokens(), cached);
  EXPECT_EQ(r2.computed_prompt, static_cast<int64_t>(turn2.size()) - cached);
  const auto fresh = run_alone({turn2}, 12);
  expect_same({r2}, fresh);
}

// A new session that shares only the head of an earlier one (a system prompt, then its own message)
// resumes at the last block boundary inside the shared part, for shared parts shorter than the sliding
// window, equal to it, and several windows long; what it produces is what it produces alone.
TEST_F(EngineTest, NewSessionReusesASharedHeadAtAnyBlockBoundary) {
  const int window = (*model_)->config().sliding_window;  // 32 on the tiny preset
  for (int shared : {window / 2, window, 3 * window, 10 * window, 3 * window + 7}) {
    SCOPED_TRACE("shared head of " + std::to_string(shared) + " tokens");
    const auto head = random_tokens(static_cast<size_t>(shared), 20 + static_cast<uint32_t>(shared));
    auto first = head, second = head;
    first.push_back(3);  // the sessions diverge right after the head
    second.push_back(4);
    const auto own = random_tokens(12, 30);
    first.insert(first.end(), own.begin(), own.end());
    second.insert(second.end(), own.rbegin(), own.rend());
    Engine engine(*model_, options(4096, true));
    collect(*engine.submit(greedy(first, 3)));
    auto h = engine.submit(greedy(second, 8));
    Result r = collect(*h);
    const int64_t reusable = shared / 16 * 16;
    EXPECT_EQ(h->cached_prompt_tokens(), reusable);
    EXPECT_EQ(r.computed_prompt, static_cast<int64_t>(second.size()) - reusable);
    expect_same({r}, run_alone({second}, 8));
  }
}

// Sixteen sessions arriving together with one 300-token system prompt: it is computed once (the others
// wait for its blocks instead of computing them too), and each session still gets its own answer.
TEST_F(EngineTest, ConcurrentSessionsComputeASharedPrefixOnce) {
  const auto system = random_tokens(300, 40);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 16; ++i) {
    auto p = system;
    const auto user = random_tokens(10, 41 + i);
    p.insert(p.end(), user.begin(), user.end());
    prompts.push_back(p);
  }
  const auto alone = run_alone(prompts, 6);
  Engine engine(*model_, options(4096, true));
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& p : prompts) handles.push_back(engine.submit(greedy(p, 6)));
  std::vector<Result> got;
  for (auto& h : handles) got.push_back(collect(*h));
  expect_same(got, alone);
  int64_t computed = 0, cached = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    computed += got[i].computed_prompt;
    cached += handles[i]->cached_prompt_tokens();
  }
  // 300 tokens once, then each session's last partial block of the prompt and its own 10 tokens.
  EXPECT_LE(computed, 300 + 16 * (10 + 16)) << "computed prompt tokens";
  EXPECT_EQ(cached, 15 * (300 / 16 * 16));
  EXPECT_GT(engine.stats().prefix_cache_entries, 300 / 16);
}

// Under a budget that holds one sequence and a little more, the cache gives way: blocks are evicted
// (least recently used leaves first), nothing a running sequence holds is touched, results do not change,
// and once every request has ended the only pages in use are the cache's own.
TEST_F(EngineTest, TinyBudgetEvictsCachedBlocksAndLeavesNoReferences) {
  const auto prompts = sixteen_prompts();
  const auto alone = run_alone(prompts, 24);
  const int64_t pages = 2 * ring_pages() + (300 + 24) / 16 + 8;
  Engine engine(*model_, options(pages, true));
  std::vector<Result> got;
  for (size_t round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (const auto& p : prompts) handles.push_back(engine.submit(greedy(p, 24)));
    got.clear();
    for (auto& h : handles) got.push_back(collect(*h));
    expect_same(got, alone);
  }
  // Stats are published after each step: wait for the step that saw the last request end (bounded only so
  // that a request that never leaves fails the test).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (engine.stats().running != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_GT(s.prefix_cache_evicted_blocks + s.prefix_cache_evicted_sliding_blocks, 0);
  EXPECT_LE(s.kv_pages_used, s.kv_pages_total);
  EXPECT_EQ(s.kv_pages_used * s.kv_page_bytes, s.prefix_cache_bytes) << "a sequence left a reference behind";
}

TEST_F(EngineTest, CancellationMidPrefillFreesEverythingWithinOneStep) {
  EngineOptions o = options(4096, true);
  o.max_num_batched_tokens = 16;
  Engine engine(*model_, o);
  // A gated request decodes beside the prompt and paces the engine: every step waits at its gate until the
  // test lets it through, so the cancel lands mid-prefill, between known steps, however threads are
  // scheduled.
  auto gate = std::make_shared<Gate>(1);
  GenerationRequest pacer = greedy(random_tokens(4, 9), 200);
  pacer.processor = gate;
  auto pace = engine.submit(std::move(pacer));
  ASSERT_TRUE(gate->wait_entered(2));  // its second step (its first decode) waits
  auto h = engine.submit(greedy(random_tokens(900, 10), 8));
  gate->allow(3);                      // steps 2-4: the prompt joins at step 3, 15 tokens a step
  ASSERT_TRUE(gate->wait_entered(5));  // step 5 waits
  EXPECT_GT(h->computed_prompt_tokens(), 0);
  h->cancel();
  pace->cancel();
  const int64_t steps_at_cancel = engine.stats().steps;
  gate->open();
  Result r = collect(*h);
  EXPECT_EQ(r.reason, FinishReason::kCancelled);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_LT(h->computed_prompt_tokens(), 900);
  EXPECT_EQ(collect(*pace).reason, FinishReason::kCancelled);
  // Stats are published after each step; wait for the one that reaped them (bounded only so that a leak
  // fails rather than hangs). What stays in use is the prefix cache's copy of the blocks completed before.
  auto leftover = [&] {
    const EngineStats s = engine.stats();
    return s.kv_pages_used - s.prefix_cache_bytes / s.kv_page_bytes;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((leftover() != 0 || engine.stats().running != 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const EngineStats s = engine.stats();
  EXPECT_EQ(leftover(), 0);
  EXPECT_LE(s.steps - steps_at_cancel, 2);  // the step in flight, then the one that reaped them
  EXPECT_EQ(s.requests_cancelled, 2);
}

TEST_F(EngineTest, QueueCapRefusesWithQueueFull) {
  EngineOptions o = options(4096, false);
  o.max_num_seqs = 1;
  o.max_queued_requests = 2;
  Engine engine(*model_, o);
  // The running request waits at its gate in its second step: it is running, not queued, and cannot
  // finish (and let a queued one in) while the queue fills.
  auto gate = std::make_shared<Gate>(1);
  GenerationRequest first = greedy(random_tokens(10, 11), 400);
  first.processor = gate;
  auto running = engine.submit(std::move(first));
  ASSERT_TRUE(gate->wait_entered(2));
  auto q1 = engine.submit(greedy(random_tokens(10, 12), 2));
  auto q2 = engine.submit(greedy(random_tokens(10, 13), 2));
  try {
    engine.submit(greedy(random_tokens(10, 14), 2));
    ADD_FAILURE() << "a third queued request must be refused";
  } catch (const EngineRejection& e) {
    EXPECT_EQ(e.kind(), EngineRejection::Kind::kQueueFull);
  }
  // check(), which the server runs before a grammar compile, says the same without queueing anything.
  try {
    engine.check(random_tokens(10, 14), greedy({}, 2).params);
    ADD_FAILURE() << "check() must see the full queue";
  } catch (const EngineRejection& e) {
    EXPECT_EQ(e.kind(), EngineRejection::Kind::kQueueFull);
  }
  EXPECT_EQ(engine.stats().requests_rejected, 2);
  running->cancel();
  gate->open();
  EXPECT_EQ(collect(*q1).reason, FinishReason::kLength);
  EXPECT_EQ(collect(*q2).reason, FinishReason::kLength);
  engine.check(random_tokens(10, 14), greedy({}, 2).params);  // room again
}

TEST_F(EngineTest, CheckRefusesWhileShuttingDown) {
  Engine engine(*model_, options(4096, false));
  const SamplingParams params = greedy({}, 2).params;
  engine.check(random_tokens(10, 18), params);
  engine.shutdown();
  try {
    engine.check(random_tokens(10, 18), params);
    FAIL() << "a draining engine must refuse before the request is prepared";
  } catch (const EngineRejection& e) {
    EXPECT_EQ(e.kind(), EngineRejection::Kind::kShuttingDown);
  }
  EXPECT_THROW(engine.submit(greedy(random_tokens(10, 18), 2)), EngineRejection);
}

TEST_F(EngineTest, RequestsThatCanNeverFitAreRejectedAtOnce) {
  Engine engine(*model_, options(ring_pages() + 8, false));
  try {
    engine.submit(greedy(random_tokens(1000, 15), 100));  // past max_model_len 1024
    FAIL();
  } catch (const EngineRejection& e) {
    EXPECT_EQ(e.kind(), EngineRejection::Kind::kTooLong);
    EXPECT_NE(std::string(e.what()).find("maximum context length is 1024"), std::string::npos) << e.what();
  }
  try {
    engine.submit(greedy(random_tokens(200, 16), 10));  // 13 blocks > the 8 the budget holds
    FAIL();
  } catch (const EngineRejection& e) {
    EXPECT_EQ(e.kind(), EngineRejection::Kind::kTooLong);
  }
  EXPECT_THROW(engine.submit(greedy({}, 4)), EngineRejection);
  EXPECT_THROW(engine.submit(greedy({5000}, 4)), EngineRejection);
  EXPECT_EQ(collect(*engine.submit(greedy(random_tokens(50, 17), 4))).tokens.size(), 4u);
}

// --kv-cache-dtype bf16 / fp8: pages of 1/2 or 1/4 the bytes, so the same exact budget holds 2x or 4x the
// pages (stats and /metrics say so), and prefix-cache reuse gives what each request gives alone with that KV.
void EngineTest::narrow_kv_case(const std::string& dtype, int64_t shrink) {
  // A float GEMM row's last bits depend on whether its chunk's row count is over the kernel's row-dots
  // limit (AVX2: 16 rows, AVX-512: 64), and one last-bit change can flip the bf16 or fp8 rounding of a K/V
  // element (a 2^-8 or 2^-4 step), which moves later log-probabilities by up to ~5e-4 (seen on AVX2 with
  // 64-token chunks). Chunks of at most 16 tokens keep the cached and uncached runs on one path on every
  // tier, so prefix reuse must give the same floats.
  const int64_t chunk = 16;
  EngineOptions o = options(64, true);
  o.kv_cache_dtype = dtype;
  {
    Engine engine(*model_, o);
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.kv_page_bytes, page_bytes() / shrink);
    EXPECT_EQ(s.kv_pages_total, 64 * shrink);
    EXPECT_EQ(s.kv_bytes_allocated, 64 * page_bytes());
  }
  const auto head = random_tokens(90, 8);
  std::vector<std::vector<int32_t>> shared;
  for (uint32_t i = 0; i < 4; ++i) {
    auto q = head;
    const auto own = random_tokens(5 + 7 * i, 30 + i);
    q.insert(q.end(), own.begin(), own.end());
    shared.push_back(q);
  }
  std::vector<Result> alone, cached;
  {
    EngineOptions a = options(4096, false);
    a.kv_cache_dtype = dtype;
    a.max_num_batched_tokens = chunk;
    Engine engine(*model_, a);
    for (const auto& p : shared) alone.push_back(collect(*engine.submit(greedy(p, 12))));
  }
  o = options(4096, true);
  o.kv_cache_dtype = dtype;
  o.max_num_batched_tokens = chunk;
  Engine engine(*model_, o);
  collect(*engine.submit(greedy(head, 4)));
  for (const auto& p : shared) cached.push_back(collect(*engine.submit(greedy(p, 12))));
  expect_same(cached, alone, 0.0f);
  EXPECT_GE(engine.stats().prefix_cache_hit_tokens, 4 * 80);
  // And the narrow KV is really in use: against f32 KV the log-probabilities move.
  const auto f32 = run_alone(shared, 12);
  float moved = 0.0f;
  for (size_t i = 0; i < f32.size(); ++i) {
    for (size_t j = 0; j < std::min(f32[i].logprobs.size(), alone[i].logprobs.size()); ++j) {
      moved = std::max(moved, std::fabs(f32[i].logprobs[j] - alone[i].logprobs[j]));
    }
  }
  EXPECT_GT(moved, 0.0f);
}

TEST_F(EngineTest, Bf16KvHoldsTwiceThePagesAndPrefixReuseKeepsResults) {
  narrow_kv_case("bf16", 2);
}

TEST_F(EngineTest, Fp8KvHoldsFourTimesThePagesAndPrefixReuseKeepsResults) {
  narrow_kv_case("fp8", 4);
}

TEST_F(EngineTest, KvBudgetIsExactAndResident) {
  const int64_t mib = 1024 * 1024;
  auto measure = [&](int64_t budget) {
    EngineOptions o = options(1, false);
    o.kv_cache_memory_bytes = budget;
    o.kv_cache_prefault = true;  // resident from the start (without it, as used: kv_cache_test.cpp)
    const int64_t before = read_process_memory().rss_anon_bytes;
    Engine engine(*model_, o);
    const int64_t after = read_process_memory().rss_anon_bytes;
    const EngineStats s = engine.stats();
    EXPECT_LE(s.kv_bytes_allocated, budget);
    EXPECT_LT(budget - s.kv_bytes_allocated, s.kv_page_bytes) << "within one block of the request";
    return std::make_pair(after - before, s.kv_bytes_allocated);
  };
  const auto small = measure(8 * mib);
  const auto large = measure(64 * mib);
  const int64_t rss_delta = large.first - small.first;
  const int64_t alloc_delta = large.second - small.second;
  // RssAnon moves by the budget difference (measured): within 4 MiB of thread stacks and allocator noise.
  // Under AddressSanitizer the arena may also commit its shadow memory (one byte per eight).
  // Under ASan: one shadow byte per eight, plus what clang's sanitizer allocator adds (measured: 4-8%).
  const double shadow = kAddressSanitizer ? 1.0 / 4 : 0.0;
  EXPECT_GE(static_cast<double>(rss_delta), static_cast<double>(alloc_delta) - 4.0 * mib)
      << "RssAnon delta " << rss_delta << " vs allocated delta " << alloc_delta;
  EXPECT_LE(static_cast<double>(rss_delta), static_cast<double>(alloc_delta) * (1.0 + shadow) + 4.0 * mib)
      << "RssAnon delta " << rss_delta << " vs allocated delta " << alloc_delta;
}

namespace {

// Forces a fixed token sequence, decided in prepare() (as a grammar's mask is). Records on which threads
// prepare() and process() ran, whether process() found its decision prepared, and how many prepare()
// calls were in flight at once across processors.
struct PrepareProbe {
  // prepare() waits until this many are in flight (for a minute at most: a bug fails the test, not hangs it)
  int rendezvous = 1;
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> prepare_threads, process_threads;
  int in_flight = 0, max_in_flight = 0;
  int meetings = 0;  // rendezvous reached so far
  std::atomic<int> unprepared{0};
};

class ForcingProcessor : public LogitsProcessor {
 public:
  ForcingProcessor(PrepareProbe& probe, int32_t first) : probe_(probe), next_(first) {}

  void prepare() override {
    std::unique_lock<std::mutex> lock(probe_.mu);
    probe_.prepare_threads.insert(std::this_thread::get_id());
    probe_.max_in_flight = std::max(probe_.max_in_flight, ++probe_.in_flight);
    if (probe_.rendezvous > 1) {
      // Two mask threads meet here: the last to arrive releases the others. Every step has both sequences
      // (submitted together, same lengths), so a meeting comes in every step.
      const int meeting = probe_.meetings;
      if (probe_.in_flight >= probe_.rendezvous) {
        ++probe_.meetings;
        probe_.cv.notify_all();
      } else {
        probe_.cv.wait_for(lock, std::chrono::seconds(60), [&] { return probe_.meetings != meeting; });
      }
    } else {
      // One mask thread: stay long enough that a second prepare() running beside it would be seen.
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      lock.lock();
    }
    --probe_.in_flight;
    decided_ = next_;
  }
  void process(std::span<float> logits) override {
    {
      std::lock_guard<std::mutex> lock(probe_.mu);
      probe_.process_threads.insert(std::this_thread::get_id());
    }
    if (decided_ < 0) {
      ++probe_.unprepared;
      decided_ = next_;
    }
    const float keep = logits[static_cast<size_t>(decided_)];
    std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
    logits[static_cast<size_t>(decided_)] = keep;
  }
  void accept(int32_t token) override {
    EXPECT_EQ(token, decided_);
    decided_ = -1;
    next_ = 14 + (next_ * 7 + 3) % 800;
  }

 private:
  PrepareProbe& probe_;
  int32_t next_;
  int32_t decided_ = -1;
};

std::vector<int32_t> forced_tokens(int32_t first, int n) {
  std::vector<int32_t> t{first};
  while (static_cast<int>(t.size()) < n) t.push_back(14 + (t.back() * 7 + 3) % 800);
  return t;
}

}  // namespace

TEST_F(EngineTest, LogitsProcessorsArePreparedOnMaskThreadsBesideTheForwardPass) {
  for (int mask_threads : {1, 2}) {
    SCOPED_TRACE("mask_threads " + std::to_string(mask_threads));
    PrepareProbe probe;
    probe.rendezvous = mask_threads;
    EngineOptions o = options(4096, false);
    o.mask_threads = mask_threads;
    Engine engine(*model_, o);
    // Submitted together (while the engine is held), both sequences run in the same steps throughout.
    std::vector<GenerationRequest> requests;
    for (int32_t first : {100, 200}) {
      GenerationRequest r = greedy(random_tokens(12, static_cast<uint32_t>(first)), 8);
      r.processor = std::make_shared<ForcingProcessor>(probe, first);
      requests.push_back(std::move(r));
    }
    const auto handles = submit_together(engine, std::move(requests));
    for (size_t i = 0; i < handles.size(); ++i) {
      EXPECT_EQ(collect(*handles[i]).tokens, forced_tokens(i == 0 ? 100 : 200, 8));
    }
    EXPECT_EQ(probe.unprepared.load(), 0) << "every step's decision was ready before sampling";
    for (const auto& t : probe.prepare_threads) {
      EXPECT_EQ(probe.process_threads.count(t), 0u) << "prepare() ran on a thread that samples";
    }
    EXPECT_EQ(probe.prepare_threads.size(), static_cast<size_t>(mask_threads));
    // One mask thread prepares one processor at a time; two prepare the step's two at once.
    EXPECT_EQ(probe.max_in_flight, mask_threads);
  }
}

}  // namespace spark
