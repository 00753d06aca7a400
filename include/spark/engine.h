// The public engine API: create an Engine over a loaded model, submit generation requests, read each
// request's tokens as they are produced. The engine runs a continuous-batching scheduler on its own
// thread: every step mixes the decode tokens of running sequences with chunks of pending prefills, runs
// each weight GEMM once over all of them, and lets requests join and leave between steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace spark {

class SparkModel;

struct EngineOptions {
  int max_num_seqs = 64;              // running sequences per step
  int max_num_batched_tokens = 512;   // tokens per step (decode tokens + prefill chunks)
  int max_queued_requests = 256;      // waiting requests beyond which submit() refuses (HTTP 429)
  int64_t kv_cache_memory_bytes = 0;  // exact KV budget; 0: kv_cache_fraction of available memory
  double kv_cache_fraction = 0.25;    // of MemAvailable at start-up, when no byte budget is given
  bool kv_cache_prefault = false;     // make the whole budget resident at start (else as pages are used)
  // K/V element type: "f32" or "bf16" (half the bytes per token: twice the tokens per budget, half the
  // bytes a long context's decode step reads; K and V rounded to bf16 after RoPE).
  std::string kv_cache_dtype = "f32";
  int block_size = 16;  // positions per KV block (the prefix-cache granularity)
  bool enable_prefix_caching = true;
  int threads = 0;  // compute threads; 0: physical cores
  // Threads that run logits processors' prepare() (grammar masks) beside each step's forward pass;
  // 0: half the compute threads, at least 1.
  int mask_threads = 0;
  // Tokens that end generation (unless a request sets ignore_eos); empty: config.json's eos_token_id(s).
  std::vector<int32_t> eos_token_ids;
};

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  std::map<int32_t, float> logit_bias;
  int logprobs = -1;  // -1: none; k >= 0: the chosen token's logprob and the top k
  int max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
};

// Adjusts logits before sampling (constrained decoding, forced tokens). One request's processor is never
// called from two threads at once, but different requests' processors run at the same time.
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // Work that depends only on the tokens accepted so far (a grammar's mask for the next token). The engine
  // calls it on its mask threads while the step's forward pass computes the logits, so that process() only
  // has to apply the result. Optional: process() must also work when prepare() was not called.
  virtual void prepare() {}
  // May set logits to -infinity to forbid tokens; must leave at least one finite.
  virtual void process(std::span<float> logits) = 0;
  // The token that was chosen.
  virtual void accept(int32_t token) = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::shared_ptr<LogitsProcessor> processor;
};

struct TokenEvent {
  int32_t token = 0;
  float logprob = 0.0f;  // of the model's distribution (raw logits), when logprobs were asked for
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason reason);

// Why a request was refused at submit().
class EngineRejection : public std::runtime_error {
 public:
  enum class Kind { kInvalid, kTooLong, kQueueFull, kShuttingDown };
  EngineRejection(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class RequestState;

// The caller's side of a submitted request. Thread-safe.
class RequestHandle {
 public:
  explicit RequestHandle(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}
  // Waits up to `timeout` for new tokens or the end; appends new tokens to `out` and returns true when
  // the request has finished (reason() is then set).
  bool wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout);
  // Stops generation at the next engine step and frees the request's cache (client gone, stop string).
  void cancel();
  FinishReason reason() const;
  std::string error() const;
  // The error (reason() kError) came from the request's own input (spark::RequestError): a client error.
  bool request_fault() const;
  int64_t prompt_tokens() const;
  int64_t cached_prompt_tokens() const;    // prompt tokens served from the prefix cache
  int64_t computed_prompt_tokens() const;  // prompt tokens actually run through the model

 private:
  std::shared_ptr<RequestState> state_;
};

struct EngineStats {
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;
  int64_t requests_cancelled = 0;
  int64_t requests_rejected = 0;
  int64_t prompt_tokens = 0;
  int64_t computed_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t prefix_cache_queries = 0;         // prompts looked up (once per request)
  int64_t prefix_cache_queried_tokens = 0;  // their prompt tokens
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_hit_tokens = 0;       // prompt tokens served from the cache
  int64_t prefix_cache_entries = 0;          // cached blocks (full layers)
  int64_t prefix_cache_sliding_entries = 0;  // of them, with their sliding block
  int64_t prefix_cache_bytes = 0;            // KV bytes only the cache holds (freed by evicting it all)
  int64_t prefix_cache_evicted_blocks = 0;
  int64_t prefix_cache_evicted_sliding_blocks = 0;  // sliding blocks dropped while their block stayed
  int64_t prefix_cache_pages = 0;  // KV pages only the cache holds (with nothing running, every page in use)
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t step_ns = 0;      // wall time of the steps that ran the model, from their plan to their tokens
  int64_t sampling_ns = 0;  // of it, the sampling phase (every sequence's sampler, in parallel on the pool)
  int waiting = 0;
  int running = 0;
  int64_t kv_pages_total = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_page_bytes = 0;
  int64_t kv_bytes_allocated = 0;
};

class Engine {
 public:
  Engine(std::shared_ptr<SparkModel> model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws EngineRejection when it can never run (too long for max_model_len or for
  // the whole KV budget, bad parameters) or the waiting queue is full.
  std::shared_ptr<RequestHandle> submit(GenerationRequest request);
  // The checks submit() makes, without queueing: a request the engine can never run, or cannot take now
  // (draining, queue full), is refused before its costly preparation (a grammar compile). submit() makes
  // them again: admission can change in between, and the prompt checks are one pass over the tokens.
  void check(const std::vector<int32_t>& prompt, const SamplingParams& params);
  EngineStats stats() const;
  const EngineOptions& options() const;
  const SparkModel& model() const;
  // Finishes queued and running requests as cancelled and stops the scheduler thread.
  void shutdown();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spark
