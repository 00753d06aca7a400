#include "server/http_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>
#include <limits>

#include <string_view>

#include "model/spark_model.h"
#include "server/access_control.h"
#include "server/api_error.h"
#include "server/generation_handler.h"
#include "server/http_front.h"
#include "server/openai_request.h"
#include "server/responses_handler.h"
#include "server/structured_output.h"
#include "spark/error.h"

namespace spark {

namespace {

// --log-requests shows request bodies up to this many bytes.
constexpr size_t kMaxLoggedBodyBytes = 4096;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 429) res.set_header("Retry-After", "1");
  res.set_content(e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void send_json(httplib::Response& res, const ordered_json& j) {
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Wraps a handler so nothing it throws escapes: API errors keep their status, anything else is a 500
// with a message, and the process carries on.
httplib::Server::Handler guarded(ServerContext& ctx, bool needs_model,
                                 std::function<void(const httplib::Request&, httplib::Response&)> fn) {
  return [&ctx, needs_model, fn](const httplib::Request& req, httplib::Response& res) {
    try {
      if (needs_model && ctx.draining.load())
        throw ApiError(503, "server_error", "the server is shutting down");
      if (needs_model && !ctx.ready.load()) throw ApiError(503, "server_error", "the model is still loading");
      fn(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, ApiError::bad_request(e.what()));
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      send_error(res, ApiError(500, "server_error", e.what()));
    }
  };
}

bool add_special_tokens_field(const ordered_json& body, bool fallback) {
  auto it = body.find("add_special_tokens");
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw ApiError::bad_request("'add_special_tokens' must be a boolean", "add_special_tokens");
  return it->get<bool>();
}

void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const ordered_json body = parse_request_body(req.body);
  const TokenizeRequest r = parse_tokenize_request(body, ctx.options.limits);
  std::vector<int32_t> ids;
  if (r.prompt) {
    // As vLLM: a plain prompt gets the tokenizer's special tokens (its post-processor's) unless told not
    // to; a chat prompt does not (the chat template writes BOS/EOS itself).
    ids = ctx.tokenizer->encode(*r.prompt, add_special_tokens_field(body, true));
  } else {
    const ChatRequest& chat = r.chat;
    ChatPrompt prompt =
        ctx.prompts->build(chat.messages, chat.tools, chat.add_generation_prompt, chat.chat_template_kwargs);
    ids = add_special_tokens_field(body, false) ? ctx.tokenizer->encode(prompt.text, true)
                                                : std::move(prompt.ids);
  }
  send_json(res, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.model->max_model_len()}});
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ordered_json body = parse_request_body(req.body);
  if (!body.contains("tokens") || !body["tokens"].is_array()) {
    throw ApiError::bad_request("'tokens' must be a list of token ids", "tokens");
  }
  std::vector<int32_t> ids;
  for (const auto& t : body["tokens"]) {
    if (!t.is_number_integer() || !ctx.tokenizer->contains(t.get<int32_t>())) {
      throw ApiError::bad_request("'tokens' must be token ids of this model's vocabulary", "tokens");
    }
    ids.push_back(t.get<int32_t>());
  }
  send_json(res, {{"prompt", ctx.tokenizer->decode(ids)}});
}

}  // namespace

// httplib's routing and request processing, run on requests the front has already read.
class HttpRouter : public httplib::Server {
 public:
  // httplib writes a chunked response only while is_running() (its listening socket set); it never
  // listens here, so mark it running for good: stopping is the front's business, and a drain must let
  // streams in flight finish. httplib only compares this value, never uses it unless its own
  // listen()/stop() run, which they do not.
  HttpRouter() { svr_sock_ = std::numeric_limits<socket_t>::max(); }

  bool serve(httplib::Stream& strm, bool close_connection, bool& connection_closed) {
    return process_request(strm, close_connection, connection_closed, nullptr);
  }
};

HttpServer::HttpServer(ServerContext& ctx) : ctx_(ctx), server_(std::make_unique<HttpRouter>()) {
  httplib::Server& s = *server_;
  const ServerOptions& o = ctx.options;
  HttpFrontOptions fo;
  // Connections waiting for a request (idle keep-alives, slow senders) hold no worker.
  fo.workers = http_worker_count(o);
  fo.max_connections = o.max_connections;
  fo.max_header_bytes = static_cast<size_t>(o.max_header_bytes) + 8 * 1024;  // headers + request line
  fo.max_body_bytes = static_cast<size_t>(o.max_body_bytes);
  fo.request_read_timeout_s = o.request_read_timeout_s;
  fo.keep_alive_timeout_s = o.keep_alive_timeout_s;
  front_ = std::make_unique<HttpFront>(
      fo,
      [this](httplib::Stream& strm, bool close_connection, bool& connection_closed) {
        return server_->serve(strm, close_connection, connection_closed);
      },
      [&ctx](int status) { ctx.metrics.count_http(status); });
  s.set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  s.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, o.keep_alive_timeout_s)));
  s.set_keep_alive_max_count(1000000);  // the front decides when a connection closes

  // Responses answered here reach the logger below like any other, which counts them in the metrics.
  s.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    const size_t max_count = static_cast<size_t>(ctx.options.max_header_count);
    const size_t max_bytes = static_cast<size_t>(ctx.options.max_header_bytes);
    size_t header_bytes = 0;
    for (const auto& [k, v] : req.headers) header_bytes += k.size() + v.size() + 4;
    if (req.headers.size() > max_count || header_bytes > max_bytes) {
      send_error(res, ApiError(431, "invalid_request_error",
                               "too many or too large request headers (at most " + std::to_string(max_count) +
                                   " headers, " + std::to_string(max_bytes) +
                                   " bytes; --max-header-count, "
                                   "--max-header-bytes)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!ctx.options.api_key.empty() && route_needs_api_key(req.path, ctx.options.metrics_public) &&
        !api_key_matches(req.get_header_value("Authorization"), ctx.options.api_key)) {
      send_error(res, ApiError(401, "authentication_error", "invalid or missing API key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib produces itself (404 route, 413 body too large, 400 unreadable request) also get
  // OpenAI's shape.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no route for " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is too large"
                                          : "bad request";
    send_error(res,
               ApiError(res.status, res.status == 404 ? "not_found_error" : "invalid_request_error", msg));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", msg));
  });
  // Request log lines carry method, path and status only: prompts are the users' data and stay out of logs
  // unless the operator asks for them with --log-requests.
  s.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    ctx.metrics.count_http(res.status);
    if (ctx.options.log_requests && !req.body.empty()) {
      const bool cut = req.body.size() > kMaxLoggedBodyBytes;
      spdlog::info("{} {} -> {}: {}{}", req.method, req.path, res.status,
                   std::string_view(req.body).substr(0, kMaxLoggedBodyBytes),
                   cut ? " [... " + std::to_string(req.body.size()) + " bytes]" : "");
    } else {
      spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
    }
  });

  // The load balancer's view: 200 only while the replica takes new work; 503 with the reason otherwise, so
  // a checker (or nginx's passive health on a retried 503) moves new requests elsewhere.
  s.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    const char* status = ctx.draining.load() ? "draining" : ctx.ready.load() ? "ready" : "loading";
    res.status = std::string_view(status) == "ready" ? 200 : 503;
    send_json(res, {{"status", status}, {"served_by", ctx.options.served_by}});
  });
  s.Get("/v1/models", guarded(ctx, false, [&ctx](const httplib::Request&, httplib::Response& res) {
          ordered_json models = ordered_json::array();
          if (ctx.ready.load()) {
            models.push_back({{"id", ctx.served_model_name},
                              {"object", "model"},
                              {"created", ctx.created},
                              {"owned_by", "spark-server"},
                              {"max_model_len", ctx.model->max_model_len()},
                              // Sampling defaults from generation_config.json (vLLM logs them; we show them).
                              {"generation_defaults", ctx.generation.sampling_json()}});
          }
          send_json(res, {{"object", "list"}, {"data", models}});
        }));
  s.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    // The model's name is written by the loading thread before `ready`: read only after it.
    const bool ready = ctx.ready.load();
    EngineStats stats = ready ? ctx.engine->stats() : EngineStats{};
    std::string text =
        ctx.metrics.render(stats, ready ? ctx.served_model_name : std::string(), ctx.kernel_isa);
    const GrammarCacheStats grammars = grammar_cache_stats();
    ServerMetrics::render_caches(
        text, {grammars.grammars, grammars.bytes, grammars.refusals, grammars.compiles_waiting_for_equal,
               grammars.compiles, ctx.responses ? ctx.responses->size() : 0,
               ctx.responses ? ctx.responses->bytes() : 0});
    res.set_content(text, "text/plain; version=0.0.4");
  });
  s.Post("/tokenize",
         guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_tokenize(ctx, req, res); }));
  s.Post("/detokenize",
         guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_detokenize(ctx, req, res); }));
  s.Post("/v1/chat/completions",
         guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_chat_completions(ctx, req, res); }));
  s.Post("/v1/completions",
         guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_completions(ctx, req, res); }));
  s.Post("/v1/responses",
         guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_responses_create(ctx, req, res); }));
  // Stored responses answer while the server drains: they need no engine.
  const char* kResponseId = R"(/v1/responses/([A-Za-z0-9_\-]+))";
  s.Get(kResponseId,
        guarded(ctx, false, [&ctx](const auto& req, auto& res) { handle_responses_get(ctx, req, res); }));
  s.Delete(kResponseId, guarded(ctx, false, [&ctx](const auto& req, auto& res) {
             handle_responses_delete(ctx, req, res);
           }));
  s.Get(R"(/v1/responses/([A-Za-z0-9_\-]+)/input_items)",
        guarded(ctx, false,
                [&ctx](const auto& req, auto& res) { handle_responses_input_items(ctx, req, res); }));
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const ServerOptions& o = ctx_.options;
  return front_->bind(o.host, o.port);
}

void HttpServer::set_served_by(const std::string& name) {
  // Default headers go on every response: routed, errors, 404s, streams.
  server_->set_default_headers({{"X-Served-By", name}});
}

void HttpServer::listen() {
  bool skip;
  {
    std::lock_guard<std::mutex> lock(mu_);
    skip = stop_requested_;
  }
  if (!skip) front_->run();
  {
    std::lock_guard<std::mutex> lock(mu_);
    listen_returned_ = true;
  }
  cv_.notify_all();
}

void HttpServer::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_requested_) return;
  stop_requested_ = true;
  front_->stop();
}

bool HttpServer::wait_stopped(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return listen_returned_; });
}

}  // namespace spark
