// Everything a request handler needs, built once at start-up.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "grammar/matcher.h"
#include "model/generation_config.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/prompt_builder.h"
#include "server/response_store.h"
#include "server/structured_output.h"
#include "spark/engine.h"
#include "tokenizer/tokenizer.h"

namespace spark {

class SparkModel;

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  int64_t max_model_len = 0;
  std::string chat_template;
  int64_t max_body_bytes = 8 * 1024 * 1024;
  // cpp-httplib caps each header line at 8 KiB but not their number: more than any real client sends is
  // a 431 before a handler looks at the request. The bytes are names and values of all headers together.
  int max_header_count = 100;
  int64_t max_header_bytes = 64 * 1024;
  int max_connections = 4096;          // open HTTP connections (idle, reading, or being served)
  double request_read_timeout_s = 10;  // a request's first byte to its last, else 408
  double keep_alive_timeout_s = 5;     // idle keep-alive connections close after this
  int default_max_tokens = 0;  // 0: up to the context limit, as vLLM does
  std::string quant = "none";  // none (as stored), auto, or a format name
  std::string priority = "speed";
  bool bf16_activations = false;  // bf16 weights: linear-layer inputs rounded to bf16 (faster prefill)
  std::string generation_config = "auto";  // auto: generation_config.json's defaults; none: OpenAI's
  double shutdown_timeout_s = 30;                // how long in-flight requests may run on after SIGTERM
  bool metrics_public = false;                   // serve /metrics without the API key
  bool log_requests = false;                     // request log lines may include prompt text
  std::string served_by;                         // X-Served-By on every response (default: hostname:port)
  RequestLimits limits;                          // vocab_size is filled in once the model is loaded
  int64_t responses_store_max_count = 1000;      // stored /v1/responses objects (0: no store)
  int64_t responses_store_max_bytes = 64 << 20;  // their JSON bytes (0: no store)
  int64_t grammar_cache_max_count = static_cast<int64_t>(kDefaultGrammarCacheCount);
  int64_t max_grammar_compiles = static_cast<int64_t>(default_grammar_compiles());
  int64_t grammar_cache_max_bytes = static_cast<int64_t>(kDefaultGrammarCacheBytes);
  EngineOptions engine;
};

// Threads that run complete requests (a streaming request holds one for its whole life): everything the
// engine admits (running + queued) plus room for health checks and metrics scrapes.
inline size_t http_worker_count(const ServerOptions& o) {
  return static_cast<size_t>(std::min(512, o.engine.max_num_seqs + o.engine.max_queued_requests + 8));
}

struct ServerContext {
  ServerOptions options;
  std::string served_model_name;
  std::string kernel_isa;
  int64_t created = 0;  // unix time the model was loaded
  std::shared_ptr<SparkModel> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<PromptBuilder> prompts;
  std::shared_ptr<const grammar::TokenVocab> grammar_vocab;  // token texts for structured outputs (no specials)
  std::shared_ptr<const grammar::TokenVocab> tool_vocab;     // the same plus the tool-call tags, for tool calls
  GenerationConfig generation;  // request defaults from generation_config.json (empty with --generation-config none)
  ServerMetrics metrics;
  std::unique_ptr<ResponseStore> responses;  // /v1/responses store (previous_response_id, GET, DELETE)
  std::atomic<bool> ready{false};
  // Graceful shutdown: `draining` refuses new work (503, /health too); `abort_generations` makes in-flight
  // generations end with a final error event; `active_generations` counts responses still being produced.
  std::atomic<bool> draining{false};
  std::atomic<bool> abort_generations{false};
  std::atomic<int> active_generations{0};
};

}  // namespace spark
