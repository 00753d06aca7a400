#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "model/spark_model.h"
#include "server/api_error.h"
#include "server/generation_handler.h"
#include "server/openai_request.h"
#include "spark/error.h"

namespace spark {

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 429) res.set_header("Retry-After", "1");
  res.set_content(e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
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

ordered_json parse_json_body(const httplib::Request& req) {
  try {
    ordered_json j = ordered_json::parse(req.body);
    if (!j.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw ApiError::bad_request(std::string("the request body is not valid JSON: ") + e.what());
  }
}

bool add_special_tokens_field(const ordered_json& body, bool fallback) {
  auto it = body.find("add_special_tokens");
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw ApiError::bad_request("'add_special_tokens' must be a boolean", "add_special_tokens");
  return it->get<bool>();
}

void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ordered_json body = parse_json_body(req);
  std::vector<int32_t> ids;
  if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) throw ApiError::bad_request("'prompt' must be a string", "prompt");
    const std::string text = body["prompt"].get<std::string>();
    // As vLLM: a plain prompt gets the tokenizer's special tokens (its post-processor's) unless told not
    // to; a chat prompt does not (the chat template writes BOS/EOS itself).
    ids = ctx.tokenizer->encode(text, add_special_tokens_field(body, true));
  } else if (body.contains("messages")) {
    ordered_json chat = body;
    const bool add_special = add_special_tokens_field(body, false);
    chat.erase("add_special_tokens");
    ChatRequest r = parse_chat_request(chat);
    ChatPrompt prompt = ctx.prompts->build(r.messages, r.tools, body.value("add_generation_prompt", true),
                                           r.chat_template_kwargs);
    ids = add_special ? ctx.tokenizer->encode(prompt.text, true) : std::move(prompt.ids);
  } else {
    throw ApiError::bad_request("give 'prompt' or 'messages'");
  }
  send_json(res, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.model->max_model_len()}});
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ordered_json body = parse_json_body(req);
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

HttpServer::HttpServer(ServerContext& ctx) : ctx_(ctx), server_(std::make_unique<httplib::Server>()) {
  httplib::Server& s = *server_;
  const ServerOptions& o = ctx.options;
  // A streaming request holds a worker for its whole life: size the pool for everything the engine admits
  // (running + queued) plus room for health checks and metrics scrapes.
  const size_t workers = static_cast<size_t>(
      std::min(512, o.engine.max_num_seqs + o.engine.max_queued_requests + 8));
  s.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  s.set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  s.set_read_timeout(30, 0);
  s.set_keep_alive_timeout(5);

  s.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (!ctx.options.api_key.empty() && req.path.rfind("/v1/", 0) == 0) {
      const std::string auth = req.get_header_value("Authorization");
      if (auth != "Bearer " + ctx.options.api_key) {
        send_error(res, ApiError(401, "authentication_error", "invalid or missing API key"));
        ctx.metrics.count_http(401);
        return httplib::Server::HandlerResponse::Handled;
      }
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
    send_error(res, ApiError(res.status, res.status == 404 ? "not_found_error" : "invalid_request_error", msg));
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
  s.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    ctx.metrics.count_http(res.status);
    spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
  });

  s.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    if (ctx.ready.load()) {
      res.status = 200;
      res.set_content("{\"status\":\"ok\"}", "application/json");
    } else {
      res.status = 503;
      res.set_content("{\"status\":\"loading\"}", "application/json");
    }
  });
  s.Get("/v1/models", guarded(ctx, false, [&ctx](const httplib::Request&, httplib::Response& res) {
          ordered_json models = ordered_json::array();
          if (ctx.ready.load()) {
            models.push_back({{"id", ctx.served_model_name},
                              {"object", "model"},
                              {"created", ctx.created},
                              {"owned_by", "spark-server"},
                              {"max_model_len", ctx.model->max_model_len()}});
          }
          send_json(res, {{"object", "list"}, {"data", models}});
        }));
  s.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    EngineStats stats = ctx.ready.load() ? ctx.engine->stats() : EngineStats{};
    res.set_content(ctx.metrics.render(stats, ctx.served_model_name, ctx.kernel_isa), "text/plain; version=0.0.4");
  });
  s.Post("/tokenize", guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_tokenize(ctx, req, res); }));
  s.Post("/detokenize", guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_detokenize(ctx, req, res); }));
  s.Post("/v1/chat/completions",
         guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_chat_completions(ctx, req, res); }));
  s.Post("/v1/completions", guarded(ctx, true, [&ctx](const auto& req, auto& res) { handle_completions(ctx, req, res); }));
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const ServerOptions& o = ctx_.options;
  int port = o.port;
  if (port == 0) {
    port = server_->bind_to_any_port(o.host);
  } else if (!server_->bind_to_port(o.host, port)) {
    port = -1;
  }
  if (port <= 0) throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port));
  return port;
}

void HttpServer::listen() { server_->listen_after_bind(); }

void HttpServer::stop() { server_->stop(); }

}  // namespace spark
