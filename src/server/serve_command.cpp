#include "server/serve_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "cpu/cpu_features.h"
#include "model/spark_model.h"
#include "server/http_server.h"
#include "server/model_source.h"
#include "server/server_context.h"
#include "server/tool_call_constraint.h"
#include "spark/error.h"

namespace spark {

namespace {

// Blocks SIGINT/SIGTERM in every thread and waits for them on one, so shutdown runs as ordinary code.
void wait_for_shutdown_signal(HttpServer& http, ServerContext& ctx) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("signal {}: shutting down", sig);
  if (ctx.engine) ctx.engine->shutdown();
  http.stop();
}

int run_server(ServerOptions o) {
  // Writes to a vanished client must fail with EPIPE, not kill the process.
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto ctx = std::make_unique<ServerContext>();
  ctx->options = o;
  HttpServer http(*ctx);
  const int port = http.bind();
  std::thread listener([&] { http.listen(); });
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
      std::shared_ptr<const ConstraintVocab> constraint_vocab;
      std::shared_ptr<const grammar::TokenVocab> grammar_vocab;
    };
    const ModelConfig& cfg = checkpoint->config();
    auto text_side = std::async(std::launch::async, [&dir, &o, &cfg] {
      TextSide t;
      t.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir));
      t.prompts = std::make_unique<PromptBuilder>(dir, o.chat_template, *t.tokenizer);
      std::vector<std::string> texts(static_cast<size_t>(cfg.vocab_size));
      for (int32_t id = 0; id < cfg.vocab_size; ++id) {
        if (t.tokenizer->contains(id))
          texts[static_cast<size_t>(id)] = std::string(t.tokenizer->token_bytes(id));
      }
      // Structured outputs never pick an added token (chat markers, <think>, <tool_call>...) for its text.
      std::vector<std::string> grammar_texts(texts.size());
      for (int32_t id = 0; id < cfg.vocab_size; ++id) {
        if (t.tokenizer->contains(id) && !t.tokenizer->is_added(id)) grammar_texts[static_cast<size_t>(id)] = texts[static_cast<size_t>(id)];
      }
      t.grammar_vocab = std::make_shared<const grammar::TokenVocab>(std::move(grammar_texts),
                                                                    std::vector<int32_t>{cfg.eos_token_id});
      t.constraint_vocab =
          std::make_shared<const ConstraintVocab>(std::move(texts), std::vector<int32_t>{cfg.eos_token_id});
      return t;
    });
    ModelOptions mo;
    mo.max_model_len = max_len;
    parse_quant_option(o.quant, o.priority, mo);
    {
      ThreadPool load_pool(o.engine.threads > 0 ? o.engine.threads : ThreadPool::default_threads());
      ctx->model = std::make_shared<SparkModel>(checkpoint, mo, load_pool);
    }
    ctx->engine = std::make_unique<Engine>(ctx->model, o.engine);
    TextSide text = text_side.get();
    ctx->tokenizer = std::move(text.tokenizer);
    ctx->prompts = std::move(text.prompts);
    ctx->constraint_vocab = std::move(text.constraint_vocab);
    ctx->grammar_vocab = std::move(text.grammar_vocab);
    ctx->served_model_name = !o.served_model_name.empty() ? o.served_model_name
                             : o.model_dir.empty()        ? "spark-demo"
                                                          : dir.filename().string();
    ctx->kernel_isa = kernels::isa_name(kernels::active_isa());
    ctx->created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    ctx->ready.store(true);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info(
        "ready: model '{}' ({} layers, max_model_len {}, weights {} = {:.0f} MiB, kernels {}) loaded in "
        "{:.2f} s",
        ctx->served_model_name, ctx->model->config().num_layers, max_len,
        kernels::weight_format_name(ctx->model->weight_format()),
        static_cast<double>(ctx->model->weight_bytes()) / (1024.0 * 1024.0), ctx->kernel_isa, secs);
  } catch (const std::exception& e) {
    http.stop();
    listener.join();
    throw;
  }
  std::thread signals([&] { wait_for_shutdown_signal(http, *ctx); });
  listener.join();
  // listen() returned: the server was stopped (by a signal).
  signals.join();
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
  app.add_option("--api-key", o->api_key, "Require this bearer token on /v1 routes")
      ->envname("SPARK_API_KEY");
  app.add_option("--served-model-name", o->served_model_name,
                 "Model name in the API (default: the folder name)");
  app.add_option("--max-model-len", o->max_model_len,
                 "Context length (default: the model's, capped at 32768)");
  app.add_option("--chat-template", o->chat_template,
                 "A Jinja chat template file to use instead of the model's");
  app.add_option("-t,--threads", o->engine.threads, "Compute threads (default: physical cores)");
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
  app.add_flag("--kv-cache-prefault", o->engine.kv_cache_prefault,
               "Make the whole KV budget resident at start-up (default: it becomes resident as it is used)");
  app.add_flag("!--no-enable-prefix-caching", o->engine.enable_prefix_caching, "Disable the prefix cache");
  app.add_option("--max-body-bytes", o->max_body_bytes, "Largest accepted request body")
      ->capture_default_str();
  app.add_option("--quant", o->quant,
                 "Weight format: none (as stored), auto (the hardware probe picks), f32, bf16, f16, int8, "
                 "w4a8, w4a16")
      ->capture_default_str();
  app.add_option("--priority", o->priority, "For --quant auto: speed or fidelity")->capture_default_str();
  app.add_option("--default-max-tokens", o->default_max_tokens,
                 "max_tokens when a chat request gives none (0: up to the context limit)");
  return [o] { return run_server(*o); };
}

}  // namespace spark
