#include "server/serve_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <thread>

#include "cpu/cpu_features.h"
#include "model/generation_config.h"
#include "model/model_source.h"
#include "model/spark_model.h"
#include "server/http_server.h"
#include "server/logits_processors.h"
#include "server/server_context.h"
#include "server/shutdown_signals.h"
#include "server/structured_output.h"
#include "spark/error.h"

namespace spark {

namespace {

using Clock = std::chrono::steady_clock;

// After the first SIGTERM: refuse new connections and requests (/health says 503), let requests in flight
// finish for up to --shutdown-timeout, then end the rest with a final error event.
void drain(HttpServer& http, ServerContext& ctx) {
  ctx.draining.store(true);
  http.stop();
  const int in_flight = ctx.active_generations.load();
  if (in_flight > 0) {
    spdlog::info("not accepting connections; waiting up to {} s for {} request(s) in flight",
                 ctx.options.shutdown_timeout_s, in_flight);
  }
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, ctx.options.shutdown_timeout_s)));
  while (ctx.active_generations.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (ctx.active_generations.load() > 0) {
    spdlog::warn("shutdown timeout: cancelling {} request(s) still running", ctx.active_generations.load());
    ctx.abort_generations.store(true);
    // Each generation notices within one poll (25 ms) unless its client stopped reading; bound the wait.
    const auto cancel_deadline = Clock::now() + std::chrono::seconds(2);
    while (ctx.active_generations.load() > 0 && Clock::now() < cancel_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (ctx.engine) ctx.engine->shutdown();
}

int run_server(ServerOptions o) {
  // First, before any thread exists, so that every thread inherits the blocked SIGINT/SIGTERM.
  ShutdownSignals signals;
  // Writes to a vanished client must fail with EPIPE, not kill the process.
  signal(SIGPIPE, SIG_IGN);

  auto ctx = std::make_unique<ServerContext>();
  ctx->options = o;
  // The kernel tier first: a wrong SPARK_FORCE_ISA or SPARK_DISABLE_CPU_FEATURES ends the start before
  // anything listens or loads (and /metrics reads it from the start).
  ctx->kernel_isa = kernels::isa_name(kernels::active_isa());
  ctx->responses = std::make_unique<ResponseStore>(static_cast<size_t>(o.responses_store_max_count),
                                                   static_cast<size_t>(o.responses_store_max_bytes));
  set_grammar_cache_limits(static_cast<size_t>(o.grammar_cache_max_count),
                           static_cast<size_t>(o.grammar_cache_max_bytes));
  set_grammar_compile_limits(o);
  HttpServer http(*ctx);
  const int port = http.bind();
  if (ctx->options.served_by.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
    ctx->options.served_by = std::string(host) + ":" + std::to_string(port);
  }
  http.set_served_by(ctx->options.served_by);
  std::thread listener([&] {
    http.listen();
    signals.request_shutdown("the HTTP listener stopped");
  });
  spdlog::info("spark-server listening on http://{}:{} (health: 503 until the model is loaded)", o.host,
               port);

  try {
    const auto t0 = std::chrono::steady_clock::now();
    const auto dir = resolve_model_dir(o.model_dir);
    auto checkpoint = std::make_shared<const Checkpoint>(dir);
    const int64_t max_len =
        resolve_max_model_len(o.max_model_len, checkpoint->config().max_position_embeddings);
    // The tokenizer, the chat template and the constraint vocabulary do not depend on the weights: they
    // load on a second thread while the weights are mapped (or quantized) and the KV cache is allocated.
    struct TextSide {
      std::unique_ptr<Tokenizer> tokenizer;
      std::unique_ptr<PromptBuilder> prompts;
      std::shared_ptr<const grammar::TokenVocab> grammar_vocab;
      std::shared_ptr<const grammar::TokenVocab> tool_vocab;
    };
    const ModelConfig& cfg = checkpoint->config();
    if (o.generation_config == "auto") ctx->generation = load_generation_config(dir);
    // Every eos id of config.json and generation_config.json ends generation.
    std::vector<int32_t> eos_ids(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end());
    for (int32_t id : ctx->generation.eos_token_ids) {
      if (std::find(eos_ids.begin(), eos_ids.end(), id) == eos_ids.end()) eos_ids.push_back(id);
    }
    for (int32_t id : eos_ids) {
      if (id >= cfg.vocab_size) {
        throw Error((dir / "generation_config.json").string() + ": eos_token_id " + std::to_string(id) +
                    " is outside the vocabulary (" + std::to_string(cfg.vocab_size) + " tokens)");
      }
    }
    auto text_side = std::async(std::launch::async, [&dir, &o, &cfg, eos_ids] {
      TextSide t;
      t.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir));
      t.prompts = std::make_unique<PromptBuilder>(dir, o.chat_template, *t.tokenizer);
      // Structured outputs never pick an added token (chat markers, <think>, <tool_call>...) for its text;
      // tool-call grammars pick the tool-call tags as the model writes them, as their own tokens.
      t.grammar_vocab = make_grammar_vocab(*t.tokenizer, cfg.vocab_size, eos_ids);
      std::vector<std::string> tool_texts(static_cast<size_t>(cfg.vocab_size));
      for (int32_t id = 0; id < cfg.vocab_size; ++id) {
        if (!t.tokenizer->contains(id)) continue;
        const std::string text(t.tokenizer->token_bytes(id));
        if (!t.tokenizer->is_added(id) || text == "<tool_call>" || text == "</tool_call>" ||
            text == "<arg_key>" || text == "</arg_key>" || text == "<arg_value>" || text == "</arg_value>")
          tool_texts[static_cast<size_t>(id)] = text;
      }
      t.tool_vocab = std::make_shared<const grammar::TokenVocab>(std::move(tool_texts), eos_ids);
      return t;
    });
    ModelOptions mo;
    mo.max_model_len = max_len;
    parse_quant_option(o.quant, o.priority, mo);
    mo.bf16_activations = o.bf16_activations;
    {
      ThreadPool load_pool(o.engine.threads > 0 ? o.engine.threads : ThreadPool::default_threads());
      ctx->model = std::make_shared<SparkModel>(checkpoint, mo, load_pool);
    }
    EngineOptions engine_options = o.engine;
    engine_options.eos_token_ids = eos_ids;
    ctx->engine = std::make_unique<Engine>(ctx->model, engine_options);
    TextSide text = text_side.get();
    ctx->tokenizer = std::move(text.tokenizer);
    ctx->prompts = std::move(text.prompts);
    ctx->grammar_vocab = std::move(text.grammar_vocab);
    ctx->tool_vocab = std::move(text.tool_vocab);
    ctx->served_model_name = !o.served_model_name.empty() ? o.served_model_name
                             : o.model_dir.empty()        ? "spark-demo"
                             // A repo id is its own name (as vLLM), not the snapshot's revision hash.
                             : !std::filesystem::is_directory(o.model_dir) ? o.model_dir
                                                                           : dir.filename().string();
    ctx->created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    ctx->options.limits.vocab_size = ctx->model->config().vocab_size;
    ctx->ready.store(true);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info(
        "ready: model '{}' ({} layers, max_model_len {}, weights {} = {:.0f} MiB, kernels {}) loaded in "
        "{:.2f} s",
        ctx->served_model_name, ctx->model->config().num_layers, max_len,
        kernels::weight_format_name(ctx->model->weight_format()),
        static_cast<double>(ctx->model->weight_bytes()) / (1024.0 * 1024.0), ctx->kernel_isa, secs);
    const auto defaults = ctx->generation.sampling_json();
    std::string eos_list;
    for (int32_t id : eos_ids) eos_list += (eos_list.empty() ? "" : ", ") + std::to_string(id);
    spdlog::info("request defaults: {} ({}); eos ids: {}", defaults.empty() ? "OpenAI's" : defaults.dump(),
                 o.generation_config == "auto"
                     ? "from generation_config.json; --generation-config none turns "
                       "them off"
                     : "--generation-config none",
                 eos_list);
  } catch (const std::exception& e) {
    // A start-up error ends the process within a second, whatever the HTTP side is doing: health pollers
    // and idle keep-alive connections must not keep it alive, and the error is the one line it prints.
    signals.set_stopping();
    http.stop();
    if (!http.wait_stopped(std::chrono::milliseconds(500))) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_process_now(1);
    }
    listener.join();
    throw;
  }
  signals.set_serving();

  const std::string why = signals.wait_for_shutdown();
  drain(http, *ctx);
  // Only idle keep-alive connections can still hold the listener (up to its keep-alive timeout): they carry
  // no work, so do not wait for them.
  if (!http.wait_stopped(std::chrono::seconds(1))) {
    spdlog::info("shut down");
    exit_process_now(0);
  }
  listener.join();
  if (why.rfind("signal", 0) != 0) throw Error(why + " unexpectedly");
  spdlog::info("shut down");
  return 0;
}

}  // namespace

std::function<int()> add_serve_options(CLI::App& app) {
  auto o = std::make_shared<ServerOptions>();
  app.add_option("--model", o->model_dir, "Checkpoint folder (default: the built-in random-weight demo)");
  app.add_option("--host", o->host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o->port, "Port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--api-key", o->api_key,
                 "Require this bearer token on every route but /health (and /metrics with --metrics-public)")
      ->envname("SPARK_API_KEY");
  app.add_flag("--metrics-public", o->metrics_public, "Serve /metrics without the API key");
  app.add_flag("--log-requests,--enable-log-requests", o->log_requests,
               "Log request bodies (prompts included; off by default so user data stays out of logs)");
  app.add_option("--served-by", o->served_by,
                 "This replica's name in the X-Served-By response header (default: hostname:port)");
  app.add_option("--shutdown-timeout", o->shutdown_timeout_s,
                 "Seconds requests in flight may run on after SIGTERM before they are cancelled")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  RequestLimits& lim = o->limits;
  app.add_option("--max-n", lim.max_n, "Largest 'n' (choices per request)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-logprobs", lim.max_logprobs, "Largest top_logprobs / logprobs count")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--max-stop-strings", lim.max_stop_strings, "Most 'stop' strings per request")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--max-stop-string-bytes", lim.max_stop_string_bytes, "Longest 'stop' string, in bytes")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-tools", lim.max_tools, "Most 'tools' per request")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--max-tool-schema-bytes", lim.max_tool_schema_bytes,
                 "Largest tool definition (name, description, parameters) as JSON, in bytes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--max-structured-output-bytes", lim.max_structured_output_bytes,
                 "Largest structured output (response_format schema as JSON, regex or choices), in bytes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--max-logit-bias", lim.max_logit_bias, "Most 'logit_bias' (and 'stop_token_ids') entries")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  app.add_option(
         "--responses-store-max-count", o->responses_store_max_count,
         "Most /v1/responses objects kept for previous_response_id and GET (least recently used go; 0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--responses-store-max-bytes", o->responses_store_max_bytes,
                 "Most bytes of JSON the /v1/responses store keeps (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option(
         "--grammar-cache-max-count", o->grammar_cache_max_count,
         "Most compiled grammars (structured outputs, tool calls) kept for reuse (least recently used go)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option(
         "--max-grammar-compiles", o->max_grammar_compiles,
         "Grammar compiles (structured outputs, strict tools) run at once, before their requests queue; "
         "4 times as many wait, and past that a request is a 429 (default: half the cores, 1 to 8)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--grammar-cache-max-bytes", o->grammar_cache_max_bytes,
                 "Most bytes the kept grammars hold, their mask caches included (measured at each insertion)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--served-model-name", o->served_model_name,
                 "Model name in the API (default: the folder name)");
  app.add_option("--max-model-len", o->max_model_len,
                 "Context length (default: the model's, capped at 32768)");
  app.add_option("--chat-template", o->chat_template,
                 "A Jinja chat template file to use instead of the model's");
  app.add_option("-t,--threads", o->engine.threads, "Compute threads (default: physical cores)");
  app.add_option("--mask-threads", o->engine.mask_threads,
                 "Threads computing structured-output masks beside each forward pass (default: half of "
                 "--threads, at least 1)")
      ->check(CLI::Range(0, 256));
  app.add_option("--max-num-seqs", o->engine.max_num_seqs, "Sequences per engine step")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o->engine.max_num_batched_tokens, "Tokens per engine step")
      ->capture_default_str();
  app.add_option("--max-queued-requests", o->engine.max_queued_requests, "Waiting requests before HTTP 429")
      ->capture_default_str();
  app.add_option("--kv-cache-memory-bytes", o->engine.kv_cache_memory_bytes,
                 "Exact KV cache budget in bytes");
  app.add_option("--kv-cache-fraction", o->engine.kv_cache_fraction,
                 "KV cache budget as a fraction of available memory (when no byte budget is given)")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", o->engine.kv_cache_dtype,
                 "K/V element type: f32, bf16 (twice the tokens per budget) or fp8 (FP8 E4M3: four times)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  app.add_flag("--kv-cache-prefault", o->engine.kv_cache_prefault,
               "Make the whole KV budget resident at start-up (default: it becomes resident as it is used)");
  app.add_flag("!--no-enable-prefix-caching", o->engine.enable_prefix_caching, "Disable the prefix cache");
  app.add_option(
         "--max-connections", o->max_connections,
         "Open HTTP connections; at the cap one idle for over 1 s is closed, else the new one gets 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--request-read-timeout", o->request_read_timeout_s,
                 "Seconds from a request's first byte to its last before 408")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--keep-alive-timeout", o->keep_alive_timeout_s,
                 "Seconds an idle keep-alive connection stays open")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--max-body-bytes", o->max_body_bytes, "Largest accepted request body")
      ->capture_default_str();
  app.add_option("--max-header-count", o->max_header_count, "Most request headers (more: 431)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--max-header-bytes", o->max_header_bytes,
                 "Largest request headers, names and values together (more: 431)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{16} << 20));
  app.add_option("--quant", o->quant,
                 "Weight format: none (as stored), auto (the hardware probe picks), f32, bf16, f16, int8, "
                 "w4a8, w4a16")
      ->capture_default_str();
  app.add_option("--priority", o->priority, "For --quant auto: speed or fidelity")->capture_default_str();
  app.add_flag("--bf16-activations", o->bf16_activations,
               "bf16 weights only: round the linear layers' inputs to bf16 so prefill runs bf16 dot products "
               "(AMX-BF16, AVX512-BF16), as llama.cpp's BF16 does; off: exact f32 products");
  app.add_option("--generation-config", o->generation_config,
                 "auto: the model's generation_config.json sets the defaults of omitted sampling fields and "
                 "adds its eos ids (as vLLM); none: OpenAI's defaults")
      ->check(CLI::IsMember({"auto", "none"}))
      ->capture_default_str();
  app.add_option("--default-max-tokens", o->default_max_tokens,
                 "max_tokens when a chat request gives none (0: up to the context limit)");
  return [o] { return run_server(*o); };
}

}  // namespace spark
