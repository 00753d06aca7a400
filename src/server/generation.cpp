#include "server/generation.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <random>

#include "model/spark_model.h"
#include "server/http_front.h"

namespace spark {

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id.push_back(hex[rng() & 15]);
  return id;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_model(const ServerContext& ctx, const std::string& model) {
  if (!model.empty() && model != ctx.served_model_name) {
    throw ApiError(404, "not_found_error", "The model `" + model + "` does not exist.", "model");
  }
}

ApiError rejection_error(const EngineRejection& e) {
  switch (e.kind()) {
    case EngineRejection::Kind::kQueueFull:
      return ApiError(429, "rate_limit_error", e.what());
    case EngineRejection::Kind::kShuttingDown:
      return ApiError(503, "server_error", e.what());
    default:
      return ApiError::bad_request(e.what());
  }
}

void submit_all(Generation& g, const CommonRequest& common, const std::vector<int32_t>& prompt,
                const std::function<std::shared_ptr<LogitsProcessor>()>& make_processor,
                const std::function<ChoiceConfig()>& make_config, bool thinking) {
  if (thinking) {
    const std::optional<int32_t> end = g.ctx.tokenizer->token_to_id("</think>");
    g.think_end = end.value_or(-1);
  }
  // Every choice's processor first: making one may compile a grammar and fail (400, 429), and a request
  // that fails must not have queued choices before it.
  std::vector<std::shared_ptr<LogitsProcessor>> processors;
  for (int i = 0; i < common.n; ++i) processors.push_back(make_processor());
  for (int i = 0; i < common.n; ++i) {
    GenerationRequest gr;
    gr.prompt = prompt;
    gr.params = common.sampling;
    if (gr.params.seed && i > 0) *gr.params.seed += static_cast<uint64_t>(i);  // choices differ, reproducibly
    gr.processor = std::move(processors[static_cast<size_t>(i)]);
    try {
      g.handles.push_back(g.ctx.engine->submit(std::move(gr)));
    } catch (const EngineRejection& e) {
      for (auto& h : g.handles) h->cancel();
      g.handles.clear();
      throw rejection_error(e);
    }
    g.streams.emplace_back(*g.ctx.tokenizer, make_config());
    g.inbox.emplace_back();
    g.done.push_back(false);
    g.reasons.push_back(FinishReason::kNone);
    g.in_reasoning.push_back(thinking);
    g.reasoning_tokens.push_back(0);
  }
}

void check_before_preparing(const ServerContext& ctx, const std::vector<int32_t>& prompt,
                            const SamplingParams& params) {
  try {
    ctx.engine->check(prompt, params);
  } catch (const EngineRejection& e) {
    throw rejection_error(e);
  }
}

int default_max_tokens(const ServerContext& ctx, size_t prompt_len, const std::string& param) {
  const int64_t room = ctx.model->max_model_len() - static_cast<int64_t>(prompt_len);
  if (room < 1) {
    throw ApiError::bad_request("this model's maximum context length is " +
                                    std::to_string(ctx.model->max_model_len()) +
                                    " tokens, but the prompt has " + std::to_string(prompt_len) + " tokens",
                                param);
  }
  if (ctx.options.default_max_tokens > 0)
    return static_cast<int>(std::min<int64_t>(room, ctx.options.default_max_tokens));
  if (ctx.generation.max_new_tokens)
    return static_cast<int>(std::min<int64_t>(room, *ctx.generation.max_new_tokens));
  return static_cast<int>(room);
}

namespace {

// Runs a generation to its end through `sink`: false when the client went away (its requests are then
// cancelled by ~Generation). Errors are thrown as ApiError (or another exception: a 500).
bool run_generation(Generation& g, bool stream, const StepFn& on_step, const SinkFn& on_done,
                    const SinkFn& on_start, bool step_always, httplib::DataSink& sink) {
  ServerContext& ctx = g.ctx;
  if (on_start) on_start(g, sink);
  while (!g.all_done()) {
    if (!sink.is_writable()) {
      ctx.metrics.count_disconnect();
      return false;
    }
    if (ctx.abort_generations.load()) {
      // --shutdown-timeout ran out: end with an error the client sees.
      g.cancel_unfinished();
      throw ApiError(503, "server_error", "the server shut down before the request finished");
    }
    auto steps = g.poll();
    if ((stream || step_always) && !steps.empty()) on_step(g, steps, sink);
  }
  g.record_metrics();
  on_done(g, sink);
  return true;
}

}  // namespace

void respond(httplib::Response& res, std::shared_ptr<Generation> g, bool stream, StepFn on_step,
             SinkFn on_done, SinkFn on_start, bool step_always,
             std::function<void(const ApiError&, httplib::DataSink&)> on_error) {
  res.set_header("Cache-Control", "no-cache");
  if (!stream) {
    // The whole reply is known before its status is sent, so an error found mid-generation (a constraint
    // that turned too costly, a shutdown) is answered with its own status by the handler's guard.
    std::string body;
    httplib::DataSink sink;
    sink.write = [&body](const char* data, size_t size) {
      body.append(data, size);
      return true;
    };
    sink.is_writable = [] { return client_still_connected(); };
    sink.done = [] {};
    if (run_generation(*g, false, on_step, on_done, on_start, step_always, sink))
      res.set_content(std::move(body), "application/json");
    return;
  }
  // Exactly "text/event-stream": with a charset the Debian build compresses and buffers the stream.
  res.set_chunked_content_provider("text/event-stream", [g, on_step, on_done, on_start, step_always,
                                                         on_error](size_t, httplib::DataSink& sink) {
    try {
      if (!run_generation(*g, true, on_step, on_done, on_start, step_always, sink)) return false;
    } catch (const ApiError& e) {
      if (on_error) {
        on_error(e, sink);
      } else {
        write_event(sink, e.body());
      }
    } catch (const std::exception& e) {
      spdlog::error("generation failed: {}", e.what());
      const ApiError err(500, "server_error", e.what());
      if (on_error) {
        on_error(err, sink);
      } else {
        write_event(sink, err.body());
      }
    }
    sink.done();
    return true;
  });
}

void write_event(httplib::DataSink& sink, const ordered_json& j) {
  const std::string line = "data: " + dump(j) + "\n\n";
  sink.write(line.data(), line.size());
}

// The session key (X-Session-Id, else the OpenAI `user` field, else the Responses `previous_response_id`) is
// for logs and metrics only: a load balancer in front routes on it (deploy/nginx), this server never does. It
// is the client's text: it reaches the log only with --log-requests, and then in a bounded, printable form.
void note_session_key(ServerContext& ctx, const httplib::Request& req, const ordered_json& body) {
  std::string key = req.get_header_value("X-Session-Id");
  std::string source = "header";
  if (key.empty() && body.is_object() && body.contains("user") && body["user"].is_string()) {
    key = body["user"].get<std::string>();
    source = "user";
  }
  if (key.empty() && body.is_object() && body.contains("previous_response_id") &&
      body["previous_response_id"].is_string()) {
    key = body["previous_response_id"].get<std::string>();
    source = "previous_response_id";
  }
  if (key.empty()) source = "none";
  ctx.metrics.count_session_key(source);
  if (source == "none" || !ctx.options.log_requests) return;
  constexpr size_t kMaxLoggedKey = 64;
  std::string shown;
  for (char c : key.substr(0, kMaxLoggedKey)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  spdlog::info("{} {} session {} (from {})", req.method, req.path, shown, source);
}

}  // namespace spark
