#include "server/generation_handler.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <thread>

#include "model/spark_model.h"
#include "server/api_error.h"
#include "server/choice_stream.h"
#include "server/generation.h"
#include "server/logits_processors.h"
#include "server/openai_request.h"
#include "server/server_context.h"

namespace spark {

namespace {

ordered_json bytes_of(const std::string& s) {
  ordered_json b = ordered_json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

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
  check_before_preparing(ctx, prompt.ids, r.sampling);
  const auto grammar = r.structured ? compile_structured_output(*r.structured, ctx.grammar_vocab) : nullptr;
  submit_all(
      *g, r, prompt.ids,
      [&] { return make_chat_logits_processor(r, prompt.thinking, *ctx.tokenizer, ctx.tool_vocab, eos, grammar); },
      [&] {
        ChoiceConfig c;
        c.stop = r.stop;
        c.chat = true;
        c.thinking = prompt.thinking;
        c.tools = tools;
        c.calls_enabled = calls_enabled;
        c.eos_token_id = eos;
        c.single_call = !r.parallel_tool_calls;
        return c;
      },
      prompt.thinking);

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
  check_before_preparing(ctx, ids, r.sampling);
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
