#include "server/generation_handler.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <thread>

#include "model/spark_model.h"
#include "server/api_error.h"
#include "server/choice_stream.h"
#include "server/logits_processors.h"
#include "server/openai_request.h"
#include "server/server_context.h"

namespace spark {

namespace {

using Clock = std::chrono::steady_clock;

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id.push_back(hex[rng() & 15]);
  return id;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void check_model(const ServerContext& ctx, const std::string& model) {
  if (!model.empty() && model != ctx.served_model_name) {
    throw ApiError(404, "not_found_error", "The model `" + model + "` does not exist.", "model");
  }
}

ApiError rejection_error(const EngineRejection& e) {
  switch (e.kind()) {
    case EngineRejection::Kind::kQueueFull: return ApiError(429, "rate_limit_error", e.what());
    case EngineRejection::Kind::kShuttingDown: return ApiError(503, "server_error", e.what());
    default: return ApiError::bad_request(e.what());
  }
}

ordered_json bytes_of(const std::string& s) {
  ordered_json b = ordered_json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// One generation: the engine handles of its n choices, their output pipelines, and timing.
struct Generation {
  ServerContext& ctx;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<ChoiceStream> streams;
  std::vector<std::vector<TokenEvent>> inbox;
  std::vector<bool> done;
  std::vector<FinishReason> reasons;
  std::vector<int32_t> prompt_ids;
  Clock::time_point start = Clock::now();
  double ttft = -1;
  bool counted = false;

  explicit Generation(ServerContext& c) : ctx(c) { ctx.active_generations.fetch_add(1); }
  ~Generation() {
    cancel_unfinished();
    ctx.active_generations.fetch_sub(1);
  }
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // A generation dropped early (client gone, error, shutdown) must not leave requests running.
  void cancel_unfinished() {
    for (size_t i = 0; i < handles.size(); ++i) {
      if (i >= done.size() || !done[i]) handles[i]->cancel();
    }
  }

  bool all_done() const {
    for (bool d : done) {
      if (!d) return false;
    }
    return true;
  }

  // Waits briefly for output, then returns each choice's new delta (and whether it just finished).
  struct Step {
    size_t choice;
    ChoiceDelta delta;
    bool finished;
  };
  std::vector<Step> poll() {
    std::vector<Step> steps;
    for (size_t i = 0; i < handles.size(); ++i) {
      if (!done[i] && inbox[i].empty()) {
        // Block on the first unfinished choice, look at the others without waiting.
        const bool first = steps.empty() && std::all_of(done.begin(), done.begin() + static_cast<std::ptrdiff_t>(i),
                                                        [](bool d) { return d; });
        if (handles[i]->wait(inbox[i], std::chrono::milliseconds(first ? 25 : 0))) reasons[i] = handles[i]->reason();
      }
    }
    for (size_t i = 0; i < handles.size(); ++i) {
      if (done[i]) continue;
      if (reasons[i] == FinishReason::kNone && handles[i]->reason() != FinishReason::kNone) {
        handles[i]->wait(inbox[i], std::chrono::milliseconds(0));
        reasons[i] = handles[i]->reason();
      }
      Step s{i, {}, false};
      if (!inbox[i].empty()) {
        if (ttft < 0) ttft = std::chrono::duration<double>(Clock::now() - start).count();
        s.delta = streams[i].on_tokens(inbox[i]);
        inbox[i].clear();
      }
      if (streams[i].stop_string_hit()) {
        handles[i]->cancel();
        reasons[i] = FinishReason::kStop;
      }
      if (reasons[i] != FinishReason::kNone) {
        if (reasons[i] == FinishReason::kError) throw ApiError(500, "server_error", handles[i]->error());
        ChoiceDelta tail = streams[i].finish(reasons[i]);
        s.delta.reasoning += tail.reasoning;
        s.delta.content += tail.content;
        s.delta.tool_calls.insert(s.delta.tool_calls.end(), tail.tool_calls.begin(), tail.tool_calls.end());
        s.finished = true;
        done[i] = true;
      }
      if (!s.delta.empty() || !s.delta.tokens.empty() || s.finished) steps.push_back(std::move(s));
    }
    return steps;
  }

  int64_t completion_tokens() const {
    int64_t n = 0;
    for (const auto& s : streams) n += static_cast<int64_t>(s.tokens().size());
    return n;
  }

  ordered_json usage() const {
    const int64_t prompt = static_cast<int64_t>(prompt_ids.size());
    const int64_t completion = completion_tokens();
    const int64_t cached = handles.empty() ? 0 : handles[0]->cached_prompt_tokens();
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  void record_metrics() {
    if (counted) return;
    counted = true;
    const double e2e = std::chrono::duration<double>(Clock::now() - start).count();
    ctx.metrics.observe_request(ttft, e2e, completion_tokens());
    for (const auto& s : streams) {
      for (const auto& r : s.recoveries()) ctx.metrics.count_parse_recovery(r.kind);
    }
  }
};

ordered_json chat_logprobs(const Tokenizer& tok, const std::vector<TokenEvent>& events) {
  ordered_json content = ordered_json::array();
  for (const TokenEvent& ev : events) {
    const std::string text = tok.contains(ev.token) ? tok.decode(std::span<const int32_t>(&ev.token, 1)) : "";
    ordered_json top = ordered_json::array();
    for (const auto& [id, lp] : ev.top_logprobs) {
      const std::string t = tok.contains(id) ? tok.decode(std::span<const int32_t>(&id, 1)) : "";
      top.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes_of(t)}});
    }
    content.push_back({{"token", text}, {"logprob", ev.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

ordered_json completion_logprobs(const Tokenizer& tok, const std::vector<TokenEvent>& events, size_t text_offset) {
  ordered_json tokens = ordered_json::array(), lps = ordered_json::array(), tops = ordered_json::array(),
               offsets = ordered_json::array();
  for (const TokenEvent& ev : events) {
    const std::string text = tok.contains(ev.token) ? tok.decode(std::span<const int32_t>(&ev.token, 1)) : "";
    tokens.push_back(text);
    lps.push_back(ev.logprob);
    ordered_json top = ordered_json::object();
    for (const auto& [id, lp] : ev.top_logprobs) {
      top[tok.contains(id) ? tok.decode(std::span<const int32_t>(&id, 1)) : ""] = lp;
    }
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

ordered_json token_ids_of(const std::vector<TokenEvent>& events) {
  ordered_json ids = ordered_json::array();
  for (const auto& ev : events) ids.push_back(ev.token);
  return ids;
}

ordered_json recoveries_json(const std::vector<ParseRecovery>& recoveries) {
  ordered_json out = ordered_json::array();
  for (const auto& r : recoveries) out.push_back({{"kind", r.kind}, {"detail", r.detail}});
  return out;
}

ordered_json tool_calls_json(const ParsedMessage& m) {
  ordered_json calls = ordered_json::array();
  for (const auto& c : m.tool_calls) {
    calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return calls;
}

// Submits one engine request per choice; on any refusal, cancels what was already submitted.
void submit_all(Generation& g, const CommonRequest& common, const std::vector<int32_t>& prompt,
                const std::function<std::shared_ptr<LogitsProcessor>()>& make_processor,
                const std::function<ChoiceConfig()>& make_config) {
  for (int i = 0; i < common.n; ++i) {
    GenerationRequest gr;
    gr.prompt = prompt;
    gr.params = common.sampling;
    if (gr.params.seed && i > 0) *gr.params.seed += static_cast<uint64_t>(i);  // choices differ, reproducibly
    gr.processor = make_processor();
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
  }
}

int default_max_tokens(const ServerContext& ctx, size_t prompt_len) {
  const int64_t room = ctx.model->max_model_len() - static_cast<int64_t>(prompt_len);
  if (room < 1) {
    throw ApiError::bad_request("this model's maximum context length is " + std::to_string(ctx.model->max_model_len()) +
                                    " tokens, but the prompt has " + std::to_string(prompt_len) + " tokens",
                                "messages");
  }
  if (ctx.options.default_max_tokens > 0) return static_cast<int>(std::min<int64_t>(room, ctx.options.default_max_tokens));
  if (ctx.generation.max_new_tokens) return static_cast<int>(std::min<int64_t>(room, *ctx.generation.max_new_tokens));
  return static_cast<int>(room);
}

// Runs the generation inside a chunked response so a vanished client is noticed (sink.is_writable()) and
// its requests cancelled, for non-streaming responses too. `on_step` writes SSE events (streaming);
// `on_done` writes the final body or the closing events.
void respond(httplib::Response& res, std::shared_ptr<Generation> g, bool stream,
             std::function<void(Generation&, std::vector<Generation::Step>&, httplib::DataSink&)> on_step,
             std::function<void(Generation&, httplib::DataSink&)> on_done) {
  ServerContext& ctx = g->ctx;
  res.set_header("Cache-Control", "no-cache");
  // Exactly "text/event-stream": with a charset the Debian build compresses and buffers the stream.
  res.set_chunked_content_provider(stream ? "text/event-stream" : "application/json",
                                   [g, stream, on_step, on_done, &ctx](size_t, httplib::DataSink& sink) {
                                     try {
                                       while (!g->all_done()) {
                                         if (!sink.is_writable()) {
                                           ctx.metrics.count_disconnect();
                                           return false;  // ~Generation cancels the engine requests
                                         }
                                         if (ctx.abort_generations.load()) {
                                           // --shutdown-timeout ran out: end with an error the client sees.
                                           g->cancel_unfinished();
                                           throw ApiError(503, "server_error",
                                                          "the server shut down before the request finished");
                                         }
                                         auto steps = g->poll();
                                         if (stream && !steps.empty()) on_step(*g, steps, sink);
                                       }
                                       g->record_metrics();
                                       on_done(*g, sink);
                                     } catch (const ApiError& e) {
                                       const std::string body = stream ? "data: " + dump(e.body()) + "\n\n" : dump(e.body());
                                       sink.write(body.data(), body.size());
                                     } catch (const std::exception& e) {
                                       spdlog::error("generation failed: {}", e.what());
                                       const std::string body = dump(ApiError(500, "server_error", e.what()).body());
                                       sink.write(body.data(), body.size());
                                     }
                                     sink.done();
                                     return true;
                                   });
}

void write_event(httplib::DataSink& sink, const ordered_json& j) {
  const std::string line = "data: " + dump(j) + "\n\n";
  sink.write(line.data(), line.size());
}

// The session key (X-Session-Id, else the OpenAI `user` field) is for logs and metrics only: a load
// balancer in front routes on it (deploy/nginx), this server never does. It is the client's text: it reaches
// the log only with --log-requests, and then in a bounded, printable form.
void note_session_key(ServerContext& ctx, const httplib::Request& req, const ordered_json& body) {
  std::string key = req.get_header_value("X-Session-Id");
  std::string source = "header";
  if (key.empty() && body.is_object() && body.contains("user") && body["user"].is_string()) {
    key = body["user"].get<std::string>();
    source = "user";
  }
  if (key.empty()) source = "none";
  ctx.metrics.count_session_key(source);
  if (source == "none" || !ctx.options.log_requests) return;
  constexpr size_t kMaxLoggedKey = 64;
  std::string shown;
  for (char c : key.substr(0, kMaxLoggedKey)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  spdlog::info("{} {} session {} (from {})", req.method, req.path, shown, source);
}

}  // namespace

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ordered_json body = parse_request_body(req.body);
  note_session_key(ctx, req, body);
  ChatRequest r = parse_chat_request(body, ctx.options.limits, ctx.generation);
  check_model(ctx, r.model);
  ChatPrompt prompt = ctx.prompts->build(r.messages, r.tools, r.add_generation_prompt, r.chat_template_kwargs);
  if (!r.max_tokens_given) r.sampling.max_tokens = default_max_tokens(ctx, prompt.ids.size());

  auto g = std::make_shared<Generation>(ctx);
  g->prompt_ids = prompt.ids;
  const bool calls_enabled = !r.tools.is_null() && r.tool_choice != ToolChoiceMode::kNone;
  const nlohmann::json tools = r.tools.is_null() ? nlohmann::json() : nlohmann::json::parse(r.tools.dump());
  const int eos = ctx.model->config().eos_token_id;
  const auto grammar = r.structured ? compile_structured_output(*r.structured, ctx.grammar_vocab) : nullptr;
  submit_all(
      *g, r, prompt.ids,
      [&] { return make_chat_logits_processor(r, prompt.thinking, *ctx.tokenizer, ctx.constraint_vocab, eos, grammar); },
      [&] {
        ChoiceConfig c;
        c.stop = r.stop;
        c.chat = true;
        c.thinking = prompt.thinking;
        c.tools = tools;
        c.calls_enabled = calls_enabled;
        c.eos_token_id = eos;
        return c;
      });

  const std::string id = random_id("chatcmpl-");
  const int64_t created = unix_now();
  auto chunk = [&ctx, id, created](size_t index, ordered_json delta, ordered_json finish) {
    ordered_json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish}};
    return ordered_json{{"id", id},
                        {"object", "chat.completion.chunk"},
                        {"created", created},
                        {"model", ctx.served_model_name},
                        {"choices", ordered_json::array({choice})}};
  };
  auto role_sent = std::make_shared<std::vector<bool>>(static_cast<size_t>(r.n), false);
  const bool logprobs = r.logprobs, token_ids = r.return_token_ids, include_usage = r.include_usage;
  respond(
      res, g, r.stream,
      [chunk, role_sent, logprobs, token_ids, include_usage](Generation& gen, std::vector<Generation::Step>& steps,
                                                             httplib::DataSink& sink) {
        for (auto& s : steps) {
          ordered_json delta = ordered_json::object();
          if (!(*role_sent)[s.choice]) {
            delta["role"] = "assistant";
            delta["content"] = "";
            (*role_sent)[s.choice] = true;
          }
          if (!s.delta.reasoning.empty()) delta["reasoning_content"] = s.delta.reasoning;
          if (!s.delta.content.empty()) delta["content"] = s.delta.content;
          if (!s.delta.tool_calls.empty()) {
            ordered_json calls = ordered_json::array();
            for (const auto& tc : s.delta.tool_calls) calls.push_back(ordered_json::parse(tc.to_openai().dump()));
            delta["tool_calls"] = calls;
          }
          // Tokens whose text is held back (a partial tag or character) need no chunk of their own unless
          // the client asked for per-token data.
          if (!delta.empty() || ((logprobs || token_ids) && !s.delta.tokens.empty())) {
            ordered_json c = chunk(s.choice, delta, nullptr);
            if (logprobs && !s.delta.tokens.empty()) c["choices"][0]["logprobs"] = chat_logprobs(*gen.ctx.tokenizer, s.delta.tokens);
            if (token_ids && !s.delta.tokens.empty()) c["choices"][0]["token_ids"] = token_ids_of(s.delta.tokens);
            if (include_usage) c["usage"] = nullptr;
            write_event(sink, c);
          }
          if (s.finished) {
            ordered_json c = chunk(s.choice, ordered_json::object(), gen.streams[s.choice].finish_reason());
            auto rec = gen.streams[s.choice].recoveries();
            if (!rec.empty()) c["choices"][0]["spark_parse_recovery"] = recoveries_json(rec);
            if (include_usage) c["usage"] = nullptr;
            write_event(sink, c);
          }
        }
      },
      [id, created, r_n = r.n, stream = r.stream, logprobs, token_ids, include_usage](Generation& gen,
                                                                                     httplib::DataSink& sink) {
        if (stream) {
          if (include_usage) {
            write_event(sink, {{"id", id},
                               {"object", "chat.completion.chunk"},
                               {"created", created},
                               {"model", gen.ctx.served_model_name},
                               {"choices", ordered_json::array()},
                               {"usage", gen.usage()}});
          }
          sink.write("data: [DONE]\n\n", 14);
          return;
        }
        ordered_json choices = ordered_json::array();
        for (int i = 0; i < r_n; ++i) {
          const ChoiceStream& s = gen.streams[static_cast<size_t>(i)];
          ordered_json msg = {{"role", "assistant"}};
          const bool calls = !s.message().tool_calls.empty();
          msg["content"] = s.message().content.empty() && calls ? ordered_json(nullptr) : ordered_json(s.message().content);
          msg["reasoning_content"] = s.reasoning().empty() ? ordered_json(nullptr) : ordered_json(s.reasoning());
          if (calls) msg["tool_calls"] = tool_calls_json(s.message());
          ordered_json choice = {{"index", i},
                                 {"message", msg},
                                 {"logprobs", logprobs ? chat_logprobs(*gen.ctx.tokenizer, s.tokens()) : ordered_json(nullptr)},
                                 {"finish_reason", s.finish_reason()}};
          if (token_ids) choice["token_ids"] = token_ids_of(s.tokens());
          auto rec = s.recoveries();
          if (!rec.empty()) choice["spark_parse_recovery"] = recoveries_json(rec);
          choices.push_back(choice);
        }
        ordered_json body = {{"id", id},           {"object", "chat.completion"},
                             {"created", created}, {"model", gen.ctx.served_model_name},
                             {"choices", choices}, {"usage", gen.usage()}};
        if (token_ids) body["prompt_token_ids"] = gen.prompt_ids;
        const std::string text = dump(body);
        sink.write(text.data(), text.size());
      });
}

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ordered_json body = parse_request_body(req.body);
  note_session_key(ctx, req, body);
  CompletionRequest r = parse_completion_request(body, ctx.options.limits, ctx.generation);
  check_model(ctx, r.model);
  std::vector<int32_t> ids = r.prompt_text ? ctx.tokenizer->encode(*r.prompt_text) : r.prompt_ids;
  if (ids.empty()) throw ApiError::bad_request("the prompt is empty", "prompt");
  std::string prompt_text = r.prompt_text ? *r.prompt_text : "";
  if (!r.prompt_text && r.echo) {
    for (int32_t t : ids) {
      if (!ctx.tokenizer->contains(t)) throw ApiError::bad_request("token id " + std::to_string(t) + " is not in the vocabulary", "prompt");
    }
    prompt_text = ctx.tokenizer->decode(ids);
  }
  if (!r.max_tokens_given) {
    // OpenAI's legacy default of 16 tokens, unless the model's generation_config.json names one.
    const int room = default_max_tokens(ctx, ids.size());
    r.sampling.max_tokens = ctx.generation.max_new_tokens ? room : std::min(16, room);
  }

  auto g = std::make_shared<Generation>(ctx);
  g->prompt_ids = ids;
  const auto grammar = r.structured ? compile_structured_output(*r.structured, ctx.grammar_vocab) : nullptr;
  const int eos = ctx.model->config().eos_token_id;
  submit_all(
      *g, r, ids,
      [&] {
        return grammar ? make_grammar_logits_processor(grammar, eos, r.sampling.max_tokens)
                       : std::shared_ptr<LogitsProcessor>();
      },
      [&] {
        ChoiceConfig c;
        c.stop = r.stop;
        c.eos_token_id = ctx.model->config().eos_token_id;
        return c;
      });
  const std::string id = random_id("cmpl-");
  const int64_t created = unix_now();
  const bool echo = r.echo, logprobs = r.logprobs >= 0, token_ids = r.return_token_ids, include_usage = r.include_usage;
  auto echoed = std::make_shared<std::vector<bool>>(static_cast<size_t>(r.n), false);
  auto chunk = [&ctx, id, created](size_t index, const std::string& text, ordered_json finish) {
    return ordered_json{{"id", id},
                        {"object", "text_completion"},
                        {"created", created},
                        {"model", ctx.served_model_name},
                        {"choices", ordered_json::array({{{"index", index},
                                                          {"text", text},
                                                          {"logprobs", nullptr},
                                                          {"finish_reason", finish}}})}};
  };
  respond(
      res, g, r.stream,
      [chunk, echoed, echo, prompt_text, logprobs, token_ids, include_usage](
          Generation& gen, std::vector<Generation::Step>& steps, httplib::DataSink& sink) {
        for (auto& s : steps) {
          std::string text = s.delta.content;
          if (echo && !(*echoed)[s.choice]) {
            text = prompt_text + text;
            (*echoed)[s.choice] = true;
          }
          if (!text.empty() || ((logprobs || token_ids) && !s.delta.tokens.empty())) {
            ordered_json c = chunk(s.choice, text, nullptr);
            if (logprobs) c["choices"][0]["logprobs"] = completion_logprobs(*gen.ctx.tokenizer, s.delta.tokens, 0);
            if (token_ids) c["choices"][0]["token_ids"] = token_ids_of(s.delta.tokens);
            if (include_usage) c["usage"] = nullptr;
            write_event(sink, c);
          }
          if (s.finished) {
            ordered_json c = chunk(s.choice, "", gen.streams[s.choice].finish_reason());
            if (include_usage) c["usage"] = nullptr;
            write_event(sink, c);
          }
        }
      },
      [id, created, r_n = r.n, stream = r.stream, echo, prompt_text, logprobs, token_ids, include_usage](
          Generation& gen, httplib::DataSink& sink) {
        if (stream) {
          if (include_usage) {
            write_event(sink, {{"id", id},
                               {"object", "text_completion"},
                               {"created", created},
                               {"model", gen.ctx.served_model_name},
                               {"choices", ordered_json::array()},
                               {"usage", gen.usage()}});
          }
          sink.write("data: [DONE]\n\n", 14);
          return;
        }
        ordered_json choices = ordered_json::array();
        for (int i = 0; i < r_n; ++i) {
          const ChoiceStream& s = gen.streams[static_cast<size_t>(i)];
          const std::string prefix = echo ? prompt_text : "";
          ordered_json choice = {
              {"index", i},
              {"text", prefix + s.message().content},
              {"logprobs", logprobs ? completion_logprobs(*gen.ctx.tokenizer, s.tokens(), prefix.size()) : ordered_json(nullptr)},
              {"finish_reason", s.finish_reason()}};
          if (token_ids) choice["token_ids"] = token_ids_of(s.tokens());
          choices.push_back(choice);
        }
        ordered_json body = {{"id", id},           {"object", "text_completion"},
                             {"created", created}, {"model", gen.ctx.served_model_name},
                             {"choices", choices}, {"usage", gen.usage()}};
        if (token_ids) body["prompt_token_ids"] = gen.prompt_ids;
        const std::string text = dump(body);
        sink.write(text.data(), text.size());
      });
}

}  // namespace spark
