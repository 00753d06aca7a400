#include "spark/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "engine/prefix_cache.h"
#include "engine/request_state.h"
#include "engine/sampler.h"
#include "model/kv_cache.h"
#include "model/spark_model.h"
#include "spark/error.h"
#include "util/background_batch.h"
#include "util/thread_pool.h"

namespace spark {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

bool RequestHandle::wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu_);
  state_->cv_.wait_for(lock, timeout,
                       [&] { return !state_->pending_.empty() || state_->reason_ != FinishReason::kNone; });
  out.insert(out.end(), state_->pending_.begin(), state_->pending_.end());
  state_->pending_.clear();
  return state_->reason_ != FinishReason::kNone;
}

void RequestHandle::cancel() {
  state_->cancel_requested.store(true);
}

FinishReason RequestHandle::reason() const {
  std::lock_guard<std::mutex> lock(state_->mu_);
  return state_->reason_;
}

std::string RequestHandle::error() const {
  std::lock_guard<std::mutex> lock(state_->mu_);
  return state_->error_;
}

bool RequestHandle::request_fault() const {
  std::lock_guard<std::mutex> lock(state_->mu_);
  return state_->request_fault_;
}

int64_t RequestHandle::prompt_tokens() const {
  return state_->prompt_tokens.load();
}
int64_t RequestHandle::cached_prompt_tokens() const {
  return state_->cached_prompt_tokens.load();
}
int64_t RequestHandle::computed_prompt_tokens() const {
  return state_->computed_prompt_tokens.load();
}

namespace {

struct Sequence {
  uint64_t id = 0;  // arrival order: the newest running sequence is preempted first
  std::shared_ptr<RequestState> state;
  SamplingParams params;
  std::shared_ptr<LogitsProcessor> processor;
  std::vector<int32_t> tokens;  // prompt, then generated tokens as they are sampled
  int64_t prompt_len = 0;
  int64_t generated = 0;
  std::unique_ptr<SequenceKv> kv;
  std::unique_ptr<Sampler> sampler;
  bool admitted_before = false;  // a preempted sequence's recomputation is not a new prompt
  // Prefix-cache chain: the blocks [0, cached_blocks) are in the cache (adopted or inserted), the last
  // one hashed cache_parent; chain_ok is false once a block could not be inserted.
  int64_t cached_blocks = 0;
  uint64_t cache_parent = PrefixCache::kRootHash;
  bool chain_ok = true;

  int64_t computed() const { return kv ? kv->num_tokens() : 0; }
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed(); }
};

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

int64_t resolve_kv_budget(const EngineOptions& o) {
  if (o.kv_cache_memory_bytes > 0) return o.kv_cache_memory_bytes;
  if (!(o.kv_cache_fraction > 0.0 && o.kv_cache_fraction <= 0.95)) {
    throw Error("--kv-cache-fraction must be in (0, 0.95]");
  }
  const int64_t avail = mem_available_bytes();
  if (avail <= 0) throw Error("cannot read MemAvailable from /proc/meminfo; pass --kv-cache-memory-bytes");
  return static_cast<int64_t>(static_cast<double>(avail) * o.kv_cache_fraction);
}

}  // namespace

class Engine::Impl {
 public:
  Impl(std::shared_ptr<SparkModel> model, const EngineOptions& options)
      : model_(std::move(model)),
        opt_(options),
        pool_(options.threads > 0 ? options.threads : ThreadPool::default_threads()),
        masks_(options.mask_threads > 0 ? options.mask_threads : std::max(1, pool_.size() / 2)),
        kv_budget_(resolve_kv_budget(options)),
        kv_pool_(model_->config(), options.block_size, kv_budget_, options.kv_cache_prefault,
                 parse_kv_cache_dtype(options.kv_cache_dtype)),
        cache_(kv_pool_) {
    if (opt_.max_num_seqs < 1) throw Error("--max-num-seqs must be >= 1");
    if (opt_.max_num_batched_tokens < 1) throw Error("--max-num-batched-tokens must be >= 1");
    if (opt_.max_queued_requests < 0) throw Error("--max-queued-requests must be >= 0");
    const ModelConfig& c = model_->config();
    if (opt_.eos_token_ids.empty()) opt_.eos_token_ids.assign(c.eos_token_ids.begin(), c.eos_token_ids.end());
    if (opt_.eos_token_ids.empty()) opt_.eos_token_ids.push_back(c.eos_token_id);
    const int64_t per_token = kv_pool_.bytes_per_token_per_layer();
    const int64_t seq_pages =
        kv_pool_.ring_pages() + (model_->max_model_len() + opt_.block_size - 1) / opt_.block_size;
    spdlog::info(
        "KV cache ({}): budget {} bytes -> {} pages of {} bytes ({} reserved, {}); full layers: {} x {} "
        "bytes per token; sliding layers: {} x {} bytes per token, ring of {} per sequence ({} pages); fits "
        "{} tokens of full-layer KV or {} sequences of max_model_len {}",
        kv_dtype_name(kv_pool_.dtype()), kv_budget_, kv_pool_.max_pages(), kv_pool_.page_bytes(),
        kv_pool_.bytes_allocated(), opt_.kv_cache_prefault ? "resident now" : "resident as used",
        c.num_full_layers(), per_token, c.num_sliding_layers(), per_token, kv_pool_.ring_capacity(),
        kv_pool_.ring_pages(), kv_pool_.max_pages() * opt_.block_size, kv_pool_.max_pages() / seq_pages,
        model_->max_model_len());
    publish_stats();
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() { shutdown(); }

  bool is_eos(int32_t token) const {
    return std::find(opt_.eos_token_ids.begin(), opt_.eos_token_ids.end(), token) != opt_.eos_token_ids.end();
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void check(const std::vector<int32_t>& prompt, const SamplingParams& p) {
    const ModelConfig& c = model_->config();
    auto reject = [&](EngineRejection::Kind kind, const std::string& msg) {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.requests_rejected;
      throw EngineRejection(kind, msg);
    };
    if (prompt.empty()) reject(EngineRejection::Kind::kInvalid, "the prompt is empty");
    for (int32_t t : prompt) {
      if (t < 0 || t >= c.vocab_size) {
        reject(EngineRejection::Kind::kInvalid, "token id " + std::to_string(t) +
                                                    " is outside the vocabulary (size " +
                                                    std::to_string(c.vocab_size) + ")");
      }
    }
    if (p.max_tokens < 1) reject(EngineRejection::Kind::kInvalid, "max_tokens must be at least 1");
    if (!(p.temperature >= 0.0f)) reject(EngineRejection::Kind::kInvalid, "temperature must be >= 0");
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
      reject(EngineRejection::Kind::kInvalid, "top_p must be in (0, 1]");
    if (p.top_k < 0) reject(EngineRejection::Kind::kInvalid, "top_k must be >= 0");
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
      reject(EngineRejection::Kind::kInvalid, "min_p must be in [0, 1]");
    if (!(p.repetition_penalty > 0.0f))
      reject(EngineRejection::Kind::kInvalid, "repetition_penalty must be > 0");
    const int64_t total = static_cast<int64_t>(prompt.size()) + p.max_tokens;
    if (total > model_->max_model_len()) {
      reject(EngineRejection::Kind::kTooLong, "this model's maximum context length is " +
                                                  std::to_string(model_->max_model_len()) + " tokens, but " +
                                                  std::to_string(total) + " were requested (" +
                                                  std::to_string(prompt.size()) + " in the prompt, " +
                                                  std::to_string(p.max_tokens) + " to generate)");
    }
    const int64_t pages = kv_pool_.ring_pages() + (total + opt_.block_size - 1) / opt_.block_size;
    if (pages > kv_pool_.max_pages()) {
      reject(EngineRejection::Kind::kTooLong,
             "the request needs " + std::to_string(pages * kv_pool_.page_bytes()) + " bytes of KV cache (" +
                 std::to_string(total) + " tokens) but the whole cache is " +
                 std::to_string(kv_pool_.bytes_allocated()) + " bytes (--kv-cache-memory-bytes)");
    }
    // Admission as it stands now (submit decides again under the same lock): a server that is draining or
    // whose queue is full answers 503 / 429 before the request's costly preparation, not after it.
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw EngineRejection(EngineRejection::Kind::kShuttingDown, "the server is shutting down");
    if (queued_ >= opt_.max_queued_requests) reject(EngineRejection::Kind::kQueueFull, queue_full_message());
  }

  std::string queue_full_message() const {
    return "the server's queue is full (" + std::to_string(opt_.max_queued_requests) +
           " waiting requests); retry later";
  }

  std::shared_ptr<RequestHandle> submit(GenerationRequest req) {
    check(req.prompt, req.params);
    const SamplingParams& p = req.params;
    auto seq = std::make_unique<Sequence>();
    seq->state = std::make_shared<RequestState>();
    seq->state->prompt_tokens = static_cast<int64_t>(req.prompt.size());
    seq->params = req.params;
    seq->processor = std::move(req.processor);
    seq->prompt_len = static_cast<int64_t>(req.prompt.size());
    const uint64_t seed =
        p.seed ? *p.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    seq->sampler = std::make_unique<Sampler>(p, req.prompt, seed);
    seq->tokens = std::move(req.prompt);
    auto handle = std::make_shared<RequestHandle>(seq->state);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_)
        throw EngineRejection(EngineRejection::Kind::kShuttingDown, "the server is shutting down");
      if (queued_ >= opt_.max_queued_requests) {
        std::lock_guard<std::mutex> slock(stats_mu_);
        ++stats_.requests_rejected;
        throw EngineRejection(EngineRejection::Kind::kQueueFull, queue_full_message());
      }
      seq->id = next_id_++;
      ++queued_;
      incoming_.push_back(std::move(seq));
    }
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.requests_submitted;
      stats_.prompt_tokens += static_cast<int64_t>(handle->prompt_tokens());
    }
    cv_.notify_all();
    return handle;
  }

  EngineStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

  const EngineOptions& options() const { return opt_; }
  const SparkModel& model() const { return *model_; }

 private:
  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock,
                 [&] { return stopping_ || !incoming_.empty() || !waiting_.empty() || !running_.empty(); });
        if (stopping_) break;
        while (!incoming_.empty()) {
          waiting_.push_back(std::move(incoming_.front()));
          incoming_.pop_front();
        }
      }
      try {
        step();
      } catch (const std::exception& e) {
        // A failed step must not take the server down: fail the step's sequences and carry on.
        spdlog::error("engine step failed: {}", e.what());
        for (auto& s : running_) finish(*s, FinishReason::kError, e.what());
        running_.clear();
      }
      publish_stats();
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : incoming_) s->state->finish(FinishReason::kCancelled, "the server is shutting down");
    for (auto& s : waiting_) s->state->finish(FinishReason::kCancelled, "the server is shutting down");
    for (auto& s : running_) {
      s->kv.reset();
      s->state->finish(FinishReason::kCancelled, "the server is shutting down");
    }
    incoming_.clear();
    waiting_.clear();
    running_.clear();
  }

  void dequeue_one() {
    std::lock_guard<std::mutex> lock(mu_);
    --queued_;
  }

  void finish(Sequence& s, FinishReason reason, const std::string& error = {}) {
    // Its complete blocks are already in the prefix cache (inserted as they were computed).
    s.kv.reset();
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.requests_finished;
      if (reason == FinishReason::kCancelled) ++stats_.requests_cancelled;
    }
    s.state->finish(reason, error);
  }

  // Frees pages until `need` are free: least-recently-used cache entries first, then the newest running
  // sequence other than `keep` (recomputed later). False if even that cannot free enough.
  bool make_room(int64_t need, const Sequence* keep, std::vector<std::pair<Sequence*, int64_t>>& plan,
                 int64_t& budget) {
    while (kv_pool_.pages_free() < need) {
      if (evict_cache(need) > 0) continue;
      Sequence* victim = nullptr;
      for (auto& s : running_) {
        if (s.get() != keep && s->kv && (victim == nullptr || s->id > victim->id)) victim = s.get();
      }
      if (victim == nullptr || (keep != nullptr && victim->id < keep->id)) return false;
      preempt(victim, plan, budget);
    }
    return true;
  }

  void preempt(Sequence* victim, std::vector<std::pair<Sequence*, int64_t>>& plan, int64_t& budget) {
    for (auto it = plan.begin(); it != plan.end(); ++it) {
      if (it->first == victim) {
        budget += it->second;
        plan.erase(it);
        break;
      }
    }
    victim->kv.reset();
    auto it = std::find_if(running_.begin(), running_.end(), [&](auto& s) { return s.get() == victim; });
    std::unique_ptr<Sequence> owned = std::move(*it);
    running_.erase(it);
    // Back to the front of the queue, oldest first, so it resumes before newer arrivals.
    auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](auto& s) { return s->id > owned->id; });
    waiting_.insert(pos, std::move(owned));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++queued_;
    }
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.preemptions;
  }

  void reap_cancelled() {
    for (auto it = running_.begin(); it != running_.end();) {
      if ((*it)->state->cancel_requested.load()) {
        (*it)->kv.reset();  // a cancelled sequence's state is not cached: it may be cut mid-prefill
        finish(**it, FinishReason::kCancelled);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->state->cancel_requested.load()) {
        (*it)->kv.reset();
        finish(**it, FinishReason::kCancelled);
        it = waiting_.erase(it);
        dequeue_one();
      } else {
        ++it;
      }
    }
  }

  // Frees cache-only pages until `need` are free; pages freed.
  int64_t evict_cache(int64_t need) {
    const int64_t blocks = cache_.evicted_blocks(), sliding = cache_.evicted_sliding_blocks();
    const int64_t freed = cache_.evict(need);
    if (freed > 0) {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.prefix_cache_evicted_blocks += cache_.evicted_blocks() - blocks;
      stats_.prefix_cache_evicted_sliding_blocks += cache_.evicted_sliding_blocks() - sliding;
    }
    return freed;
  }

  // A running sequence that is still computing blocks of `s`'s prompt beyond what the cache holds:
  // `s` waits for them rather than computing them a second time (many sessions, one system prompt).
  bool shared_prefix_in_flight(const Sequence& s, int64_t cached) const {
    const int64_t bs = opt_.block_size;
    const int64_t usable = (static_cast<int64_t>(s.tokens.size()) - 1) / bs * bs;
    if (usable <= cached) return false;
    for (const auto& r : running_) {
      if (!r->kv || !r->chain_ok || r->computed() >= usable) continue;
      const int64_t n = std::min<int64_t>(usable, static_cast<int64_t>(r->tokens.size()));
      const auto diff = std::mismatch(s.tokens.begin(), s.tokens.begin() + n, r->tokens.begin());
      const int64_t common = (diff.first - s.tokens.begin()) / bs * bs;
      if (common > cached && r->computed() < common) return true;
    }
    return false;
  }

  void admit() {
    for (size_t i = 0; i < waiting_.size() && static_cast<int>(running_.size()) < opt_.max_num_seqs;) {
      Sequence& s = *waiting_[i];
      if (!s.kv) s.kv = std::make_unique<SequenceKv>(kv_pool_);
      if (opt_.enable_prefix_caching && s.kv->num_tokens() == 0) {
        // At least one token must be computed to have logits to sample from.
        PrefixCache::Match hit = cache_.lookup(s.tokens, static_cast<int64_t>(s.tokens.size()) - 1);
        if (shared_prefix_in_flight(s, hit.tokens)) {
          s.kv.reset();
          ++i;
          continue;
        }
        s.cached_blocks = 0;
        s.cache_parent = PrefixCache::kRootHash;
        s.chain_ok = true;
        if (hit.tokens > 0 && s.kv->adopt_prefix(hit.full_pages, hit.slide, &pool_)) {
          s.cached_blocks = hit.tokens / opt_.block_size;
          s.cache_parent = hit.last_hash;
        } else {
          hit.tokens = 0;
        }
        if (!s.admitted_before) {
          const int64_t reused = std::min<int64_t>(hit.tokens, s.prompt_len);
          s.state->cached_prompt_tokens += reused;
          std::lock_guard<std::mutex> lock(stats_mu_);
          ++stats_.prefix_cache_queries;
          stats_.prefix_cache_queried_tokens += s.prompt_len;
          if (reused > 0) ++stats_.prefix_cache_hits;
          stats_.prefix_cache_hit_tokens += reused;
        }
      }
      const int64_t first = std::min<int64_t>(s.pending(), opt_.max_num_batched_tokens);
      const int64_t need = s.kv->pages_needed(s.computed() + first);
      if (kv_pool_.pages_free() < need) evict_cache(need);
      if (kv_pool_.pages_free() < need) {
        s.kv.reset();  // do not hold pages while waiting
        break;
      }
      s.admitted_before = true;
      running_.push_back(std::move(waiting_[i]));
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      dequeue_one();
    }
  }

  // Before a chunk: capture pages for the sliding layers of every block it touches, so each complete
  // block enters the cache with its sliding block. Only free or cache-held pages are used: capture never
  // preempts a sequence, and a block without one is still cached for its full layers.
  void prepare_capture(Sequence& s, int64_t n) {
    const int per_block = kv_pool_.slide_pages_per_block();
    if (!opt_.enable_prefix_caching || !s.chain_ok || per_block == 0) return;
    const int64_t bs = opt_.block_size;
    for (int64_t b = s.computed() / bs; b <= (s.computed() + n - 1) / bs; ++b) {
      if (s.kv->capturing(b)) continue;
      if (kv_pool_.pages_free() < per_block) evict_cache(per_block);
      if (kv_pool_.pages_free() < per_block) return;
      std::vector<int> pages;
      for (int i = 0; i < per_block; ++i) pages.push_back(kv_pool_.allocate());
      s.kv->set_capture(b, std::move(pages));
    }
  }

  // After a chunk: every block it completed goes into the cache, chained to the one before.
  void insert_completed_blocks(Sequence& s) {
    if (!opt_.enable_prefix_caching) return;
    const int64_t bs = opt_.block_size;
    while (s.chain_ok && (s.cached_blocks + 1) * bs <= s.computed()) {
      const int64_t b = s.cached_blocks;
      std::span<const int32_t> tokens(s.tokens.data() + b * bs, static_cast<size_t>(bs));
      auto h = cache_.insert(s.cache_parent, tokens, s.kv->blocks()[static_cast<size_t>(b)],
                             s.kv->take_capture(b));
      if (!h) {
        s.chain_ok = false;
        break;
      }
      s.cache_parent = *h;
      ++s.cached_blocks;
    }
  }

  void step() {
    reap_cancelled();
    admit();
    if (running_.empty()) {
      if (!waiting_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }

    // Decode tokens first (one each, oldest first), then prefill chunks with the remaining budget.
    std::vector<Sequence*> order;
    for (auto& s : running_) order.push_back(s.get());
    std::stable_sort(order.begin(), order.end(), [](const Sequence* a, const Sequence* b) {
      const bool da = a->pending() == 1, db = b->pending() == 1;
      return da != db ? da : a->id < b->id;
    });
    int64_t budget = opt_.max_num_batched_tokens;
    std::vector<std::pair<Sequence*, int64_t>> plan;
    for (Sequence* s : order) {
      if (budget <= 0) break;
      if (!s->kv) continue;  // preempted earlier in this loop
      const int64_t n = std::min(s->pending(), budget);
      const int64_t need = s->kv->pages_needed(s->computed() + n);
      if (!make_room(need, s, plan, budget)) {
        // Nothing newer to preempt: this sequence itself waits for pages.
        preempt(s, plan, budget);
        continue;
      }
      if (!s->kv->reserve(s->computed() + n)) throw Error("KV reserve failed after make_room");
      plan.emplace_back(s, n);
      budget -= n;
    }
    if (plan.empty()) return;
    const auto step_start = std::chrono::steady_clock::now();
    for (auto& [s, n] : plan) prepare_capture(*s, n);

    std::vector<SequenceChunk> chunks;
    int64_t prompt_computed = 0;
    for (auto& [s, n] : plan) {
      const int64_t start = s->computed();
      const bool last = start + n == static_cast<int64_t>(s->tokens.size());
      chunks.push_back(
          {s->kv.get(), s->tokens.data() + start, n, last ? LogitsMode::kLast : LogitsMode::kNone});
      const int64_t prompt_part = std::clamp<int64_t>(s->prompt_len - start, 0, n);
      s->state->computed_prompt_tokens += prompt_part;
      prompt_computed += prompt_part;
    }
    // Logits processors' masks depend only on the tokens accepted so far: they are computed on the mask
    // threads while the forward pass runs, so constrained sequences add little to a step. A prepare() that
    // fails is redone by process(), where the error ends its request.
    std::vector<LogitsProcessor*> to_prepare;
    for (size_t i = 0; i < plan.size(); ++i) {
      if (chunks[i].logits == LogitsMode::kLast && plan[i].first->processor)
        to_prepare.push_back(plan[i].first->processor.get());
    }
    struct WaitForMasks {
      BackgroundBatch& masks;
      ~WaitForMasks() { masks.wait(); }  // also when the forward pass throws: no prepare() outlives the step
    } wait_for_masks{masks_};
    if (!to_prepare.empty()) {
      masks_.start(to_prepare.size(), [&to_prepare](size_t i) {
        try {
          to_prepare[i]->prepare();
        } catch (...) {
        }
      });
    }
    model_->forward(chunks, logits_, pool_);
    masks_.wait();
    for (auto& [s, n] : plan) insert_completed_blocks(*s);
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.steps;
      stats_.computed_prompt_tokens += prompt_computed;
    }

    // Sample every sequence that produced logits. Each has its own logits row, sampler, random stream and
    // logits processor (whose mask is ready), so they sample in parallel on the compute pool: with 16-64
    // sequences, sampling over a 131k vocabulary is otherwise a serial tail of every step.
    const auto sampling_start = std::chrono::steady_clock::now();
    const size_t vocab = static_cast<size_t>(model_->config().vocab_size);
    std::vector<size_t> sampled;  // plan index of each logits row
    for (size_t i = 0; i < plan.size(); ++i) {
      if (chunks[i].logits == LogitsMode::kLast) sampled.push_back(i);
    }
    std::vector<TokenEvent> events(sampled.size());
    std::vector<std::string> sample_errors(sampled.size());
    auto sample_row = [&](size_t r) {
      Sequence& s = *plan[sampled[r]].first;
      std::span<float> logits(logits_.data() + r * vocab, vocab);
      try {
        events[r] = s.sampler->sample(logits, s.processor.get());
      } catch (const RequestError& e) {
        s.state->set_request_fault();
        sample_errors[r] = e.what();
      } catch (const std::exception& e) {
        // A request's own logits processor failing ends that request only.
        sample_errors[r] = e.what();
        if (sample_errors[r].empty()) sample_errors[r] = "sampling failed";
      }
    };
    if (sampled.size() > 1) {
      pool_.parallel_for(sampled.size(), 1, [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) sample_row(r);
      });
    } else if (!sampled.empty()) {
      sample_row(0);
    }
    const auto sampling_end = std::chrono::steady_clock::now();

    std::vector<Sequence*> done;
    std::vector<FinishReason> reasons;
    std::vector<std::string> errors;
    for (size_t r = 0; r < sampled.size(); ++r) {
      Sequence& s = *plan[sampled[r]].first;
      if (!sample_errors[r].empty()) {
        done.push_back(&s);
        reasons.push_back(FinishReason::kError);
        errors.push_back(std::move(sample_errors[r]));
        continue;
      }
      const TokenEvent& ev = events[r];
      s.tokens.push_back(ev.token);
      ++s.generated;
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        ++stats_.generated_tokens;
      }
      s.state->push(ev);
      const bool stop_token = (!s.params.ignore_eos && is_eos(ev.token)) ||
                              std::find(s.params.stop_token_ids.begin(), s.params.stop_token_ids.end(),
                                        ev.token) != s.params.stop_token_ids.end();
      FinishReason reason = FinishReason::kNone;
      if (stop_token) {
        reason = FinishReason::kStop;
      } else if (s.generated >= s.params.max_tokens ||
                 static_cast<int64_t>(s.tokens.size()) >= model_->max_model_len()) {
        reason = FinishReason::kLength;
      }
      if (reason != FinishReason::kNone) {
        done.push_back(&s);
        reasons.push_back(reason);
        errors.emplace_back();
      }
    }
    for (size_t i = 0; i < done.size(); ++i) {
      auto it = std::find_if(running_.begin(), running_.end(), [&](auto& p) { return p.get() == done[i]; });
      finish(**it, reasons[i], errors[i]);
      running_.erase(it);
    }
    {
      const auto ns = [](auto d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.step_ns += ns(std::chrono::steady_clock::now() - step_start);
      stats_.sampling_ns += ns(sampling_end - sampling_start);
    }
  }

  void publish_stats() {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.waiting = static_cast<int>(waiting_.size());
    stats_.running = static_cast<int>(running_.size());
    stats_.kv_pages_total = kv_pool_.max_pages();
    stats_.kv_pages_used = kv_pool_.pages_in_use();
    stats_.kv_page_bytes = kv_pool_.page_bytes();
    stats_.kv_bytes_allocated = kv_pool_.bytes_allocated();
    stats_.prefix_cache_entries = cache_.blocks();
    stats_.prefix_cache_sliding_entries = cache_.sliding_blocks();
    stats_.prefix_cache_bytes = cache_.pages_held_exclusively() * kv_pool_.page_bytes();
    stats_.prefix_cache_pages = cache_.pages_held_exclusively();
  }

  std::shared_ptr<SparkModel> model_;
  EngineOptions opt_;
  ThreadPool pool_;
  BackgroundBatch masks_;
  int64_t kv_budget_;  // resolved once: MemAvailable changes as memory is used
  KvPagePool kv_pool_;
  PrefixCache cache_;
  std::vector<float> logits_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int queued_ = 0;  // incoming + waiting
  uint64_t next_id_ = 0;
  std::deque<std::unique_ptr<Sequence>> incoming_;

  // Engine-thread only.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::thread thread_;
};

Engine::Engine(std::shared_ptr<SparkModel> model, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), options)) {}
Engine::~Engine() = default;
std::shared_ptr<RequestHandle> Engine::submit(GenerationRequest request) {
  return impl_->submit(std::move(request));
}
void Engine::check(const std::vector<int32_t>& prompt, const SamplingParams& params) {
  impl_->check(prompt, params);
}
EngineStats Engine::stats() const {
  return impl_->stats();
}
const EngineOptions& Engine::options() const {
  return impl_->options();
}
const SparkModel& Engine::model() const {
  return impl_->model();
}
void Engine::shutdown() {
  impl_->shutdown();
}

}  // namespace spark
