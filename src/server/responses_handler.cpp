#include "server/responses_handler.h"

#include <httplib.h>

#include "model/spark_model.h"
#include "server/generation.h"
#include "server/logits_processors.h"
#include "server/responses_request.h"

namespace spark {

namespace {

// Turns a choice's deltas into output items (reasoning, message, function_call) and the typed events that
// build them. The non-streaming path runs the same builder and discards the events, so a streamed
// response's final object and a whole one are built the same way.
class OutputBuilder {
 public:
  explicit OutputBuilder(std::function<void(ordered_json)> emit) : emit_(std::move(emit)) {}

  void reasoning(const std::string& text) {
    if (text.empty()) return;
    if (open_ != Open::kReasoning) {
      close();
      open(Open::kReasoning, {{"id", new_item_id("rs_")},
                              {"type", "reasoning"},
                              {"summary", ordered_json::array()},
                              {"content", ordered_json::array()},
                              {"status", "in_progress"}});
      emit_part_added({{"type", "reasoning_text"}, {"text", ""}});
    }
    text_ += text;
    emit_({{"type", "response.reasoning_text.delta"},
           {"item_id", item()["id"]},
           {"output_index", index()},
           {"content_index", 0},
           {"delta", text}});
  }

  void content(const std::string& text) {
    if (text.empty()) return;
    content_item();
    text_ += text;
    emit_({{"type", "response.output_text.delta"},
           {"item_id", item()["id"]},
           {"output_index", index()},
           {"content_index", 0},
           {"delta", text},
           {"logprobs", ordered_json::array()}});
  }

  // Opens a message item unless one is open.
  void content_item() {
    if (open_ != Open::kMessage) {
      close();
      open(Open::kMessage, {{"id", new_item_id("msg_")},
                            {"type", "message"},
                            {"status", "in_progress"},
                            {"role", "assistant"},
                            {"content", ordered_json::array()}});
      emit_part_added(text_part(""));
    }
  }

  // A message or function_call item was produced.
  bool has_reply() const {
    for (const auto& it : items_) {
      if (!is_reasoning(it)) return true;
    }
    return false;
  }

  void call(const ToolCallDelta& d) {
    if (open_ != Open::kCall || d.index != call_index_) {
      close();
      call_index_ = d.index;
      open(Open::kCall, {{"id", new_item_id("fc_")},
                         {"type", "function_call"},
                         {"status", "in_progress"},
                         {"arguments", ""},
                         {"call_id", d.id},
                         {"name", d.name}});
    }
    if (d.arguments.empty()) return;
    text_ += d.arguments;
    emit_({{"type", "response.function_call_arguments.delta"},
           {"item_id", item()["id"]},
           {"output_index", index()},
           {"delta", d.arguments}});
  }

  // Ends the open item: its .done events, then output_item.done with the finished item.
  void close() {
    if (open_ == Open::kNone) return;
    ordered_json& it = item();
    it["status"] = "completed";
    if (open_ == Open::kReasoning) {
      ordered_json part = {{"type", "reasoning_text"}, {"text", text_}};
      it["content"] = ordered_json::array({part});
      emit_({{"type", "response.reasoning_text.done"},
             {"item_id", it["id"]},
             {"output_index", index()},
             {"content_index", 0},
             {"text", text_}});
      emit_part_done(part);
    } else if (open_ == Open::kMessage) {
      ordered_json part = text_part(text_);
      it["content"] = ordered_json::array({part});
      emit_({{"type", "response.output_text.done"},
             {"item_id", it["id"]},
             {"output_index", index()},
             {"content_index", 0},
             {"text", text_},
             {"logprobs", ordered_json::array()}});
      emit_part_done(part);
    } else {
      it["arguments"] = text_;
      emit_({{"type", "response.function_call_arguments.done"},
             {"item_id", it["id"]},
             {"output_index", index()},
             {"name", it["name"]},
             {"arguments", text_}});
    }
    emit_({{"type", "response.output_item.done"}, {"output_index", index()}, {"item", it}});
    open_ = Open::kNone;
    text_.clear();
  }

  const ordered_json& items() const { return items_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };

  static bool is_reasoning(const ordered_json& it) {
    return it["type"].is_string() && it["type"].get_ref<const std::string&>() == "reasoning";
  }

  static ordered_json text_part(const std::string& text) {
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", ordered_json::array()},
            {"logprobs", ordered_json::array()}};
  }
  void open(Open kind, ordered_json it) {
    open_ = kind;
    items_.push_back(std::move(it));
    emit_({{"type", "response.output_item.added"}, {"output_index", index()}, {"item", item()}});
  }
  void emit_part_added(const ordered_json& part) {
    emit_({{"type", "response.content_part.added"},
           {"item_id", item()["id"]},
           {"output_index", index()},
           {"content_index", 0},
           {"part", part}});
  }
  void emit_part_done(const ordered_json& part) {
    emit_({{"type", "response.content_part.done"},
           {"item_id", item()["id"]},
           {"output_index", index()},
           {"content_index", 0},
           {"part", part}});
  }
  ordered_json& item() { return items_.back(); }
  size_t index() const { return items_.size() - 1; }

  std::function<void(ordered_json)> emit_;
  ordered_json items_ = ordered_json::array();
  Open open_ = Open::kNone;
  size_t call_index_ = 0;
  std::string text_;
};

// What one POST /v1/responses carries from start to end.
struct ResponseState {
  std::string id;
  int64_t created_at = 0;
  ordered_json echo;
  ordered_json previous_response_id;
  bool store = true;
  bool stream = false;
  ordered_json input_items;
  int64_t sequence = 0;
  std::vector<ordered_json> pending;  // events not yet written (streaming only)
  std::unique_ptr<OutputBuilder> builder;

  ordered_json object(const char* status, ordered_json output, ordered_json usage, ordered_json incomplete,
                      ordered_json error, const std::string& model) const {
    ordered_json r = {{"id", id},
                      {"object", "response"},
                      {"created_at", created_at},
                      {"status", status},
                      {"background", false},
                      {"error", std::move(error)},
                      {"incomplete_details", std::move(incomplete)},
                      {"model", model},
                      {"output", std::move(output)},
                      {"previous_response_id", previous_response_id},
                      {"store", store},
                      {"usage", std::move(usage)}};
    for (const auto& [k, v] : echo.items()) r[k] = v;
    return r;
  }

  void flush(httplib::DataSink& sink) {
    for (auto& e : pending) {
      const std::string line = "event: " + e["type"].get<std::string>() + "\ndata: " + dump(e) + "\n\n";
      sink.write(line.data(), line.size());
    }
    pending.clear();
  }
};

ordered_json usage_of(const Generation& g) {
  const int64_t input = static_cast<int64_t>(g.prompt_ids.size());
  const int64_t output = g.completion_tokens();
  const int64_t cached = g.handles.empty() ? 0 : g.handles[0]->cached_prompt_tokens();
  return {{"input_tokens", input},
          {"input_tokens_details", json_object_of("cached_tokens", cached)},
          {"output_tokens", output},
          {"output_tokens_details", json_object_of("reasoning_tokens", g.total_reasoning_tokens())},
          {"total_tokens", input + output}};
}

ApiError not_found(const std::string& id) {
  return ApiError(404, "invalid_request_error", "Response with id '" + id + "' not found.", "response_id");
}

void send(httplib::Response& res, const ordered_json& j) {
  res.set_content(dump(j), "application/json");
}

}  // namespace

void handle_responses_create(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const ordered_json body = parse_request_body(req.body);
  note_session_key(ctx, req, body);
  ordered_json history = ordered_json::array();
  const std::optional<std::string> previous = previous_response_id_of(body);
  if (previous) {
    std::optional<StoredResponse> stored = ctx.responses ? ctx.responses->get(*previous) : std::nullopt;
    if (!stored) {
      throw ApiError(400, "invalid_request_error", "Previous response with id '" + *previous + "' not found.",
                     "previous_response_id");
    }
    history = stored->conversation();
  }
  ResponsesRequest r = parse_responses_request(body, history, ctx.options.limits, ctx.generation);
  ChatRequest& chat = r.chat;
  check_model(ctx, chat.model);
  ChatPrompt prompt = ctx.prompts->build(chat.messages, chat.tools, true, chat.chat_template_kwargs);
  if (!chat.max_tokens_given) chat.sampling.max_tokens = default_max_tokens(ctx, prompt.ids.size(), "input");

  auto g = std::make_shared<Generation>(ctx);
  g->prompt_ids = prompt.ids;
  const bool calls_enabled = !chat.tools.is_null() && chat.tool_choice != ToolChoiceMode::kNone;
  const nlohmann::json tools =
      chat.tools.is_null() ? nlohmann::json() : nlohmann::json::parse(chat.tools.dump());
  const int eos = ctx.model->config().eos_token_id;
  check_before_preparing(ctx, prompt.ids, chat.sampling);
  const auto grammar =
      chat.structured ? compile_structured_output(*chat.structured, ctx.grammar_vocab) : nullptr;
  submit_all(
      *g, chat, prompt.ids,
      [&] {
        return make_chat_logits_processor(chat, prompt.thinking, *ctx.tokenizer, ctx.tool_vocab, eos,
                                          grammar);
      },
      [&] {
        ChoiceConfig c;
        c.chat = true;
        c.thinking = prompt.thinking;
        c.tools = tools;
        c.calls_enabled = calls_enabled;
        c.single_call = !chat.parallel_tool_calls;
        c.eos_token_id = eos;
        return c;
      },
      prompt.thinking);

  auto st = std::make_shared<ResponseState>();
  st->id = new_item_id("resp_");
  st->created_at = unix_now();
  st->echo = std::move(r.echo);
  st->previous_response_id = previous ? ordered_json(*previous) : ordered_json(nullptr);
  st->store = r.store;
  st->stream = r.stream;
  st->input_items = std::move(r.input_items);
  ResponseState* raw = st.get();
  st->builder = std::make_unique<OutputBuilder>([raw](ordered_json e) {
    if (!raw->stream) return;
    e["sequence_number"] = raw->sequence++;
    raw->pending.push_back(std::move(e));
  });
  const std::string model = ctx.served_model_name;

  respond(
      res, g, r.stream,
      [st](Generation&, std::vector<Generation::Step>& steps, httplib::DataSink& sink) {
        for (auto& s : steps) {
          st->builder->reasoning(s.delta.reasoning);
          st->builder->content(s.delta.content);
          for (const auto& c : s.delta.tool_calls) st->builder->call(c);
        }
        if (st->stream) st->flush(sink);
      },
      [st, model](Generation& gen, httplib::DataSink& sink) {
        const ChoiceStream& s = gen.streams[0];
        const bool truncated = s.finish_reason() == "length";
        // A completed turn answers with a message or calls, as OpenAI's do: an empty reply (the model ended
        // at once, or only reasoned) is an empty message, which agent loops take as the final output.
        if (!truncated && !st->builder->has_reply()) st->builder->content_item();
        st->builder->close();
        ordered_json response =
            st->object(truncated ? "incomplete" : "completed", st->builder->items(), usage_of(gen),
                       truncated ? json_object_of("reason", "max_output_tokens") : ordered_json(nullptr),
                       nullptr, model);
        if (st->store && gen.ctx.responses)
          gen.ctx.responses->put(st->id, StoredResponse{response, st->input_items});
        if (!st->stream) {
          const std::string text = dump(response);
          sink.write(text.data(), text.size());
          return;
        }
        ordered_json done = {{"type", truncated ? "response.incomplete" : "response.completed"},
                             {"response", response}};
        done["sequence_number"] = st->sequence++;
        st->pending.push_back(std::move(done));
        st->flush(sink);
      },
      [st, model](Generation&, httplib::DataSink& sink) {
        if (!st->stream) return;
        const ordered_json snapshot =
            st->object("in_progress", ordered_json::array(), nullptr, nullptr, nullptr, model);
        for (const char* type : {"response.created", "response.in_progress"}) {
          st->pending.push_back(
              {{"type", type}, {"response", snapshot}, {"sequence_number", st->sequence++}});
        }
        st->flush(sink);
      },
      true,
      // A stream's failure (respond() answers a non-streamed one with its own status).
      [st, model](const ApiError& e, httplib::DataSink& sink) {
        ordered_json error = {{"code", e.type()}, {"message", e.what()}};
        ordered_json failed = {
            {"type", "response.failed"},
            {"response", st->object("failed", st->builder->items(), nullptr, nullptr, error, model)},
            {"sequence_number", st->sequence++}};
        st->pending.push_back(std::move(failed));
        st->flush(sink);
      });
}

void handle_responses_get(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  std::optional<StoredResponse> stored = ctx.responses ? ctx.responses->get(id) : std::nullopt;
  if (!stored) throw not_found(id);
  send(res, stored->response);
}

void handle_responses_delete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (!ctx.responses || !ctx.responses->erase(id)) throw not_found(id);
  send(res, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
}

// Newest first unless order=asc, `limit` (1..100, default 20) items after the item id `after`.
void handle_responses_input_items(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  std::optional<StoredResponse> stored = ctx.responses ? ctx.responses->get(id) : std::nullopt;
  if (!stored) throw not_found(id);
  const std::string order = req.has_param("order") ? req.get_param_value("order") : "desc";
  if (order != "asc" && order != "desc") throw ApiError::bad_request("'order' must be asc or desc", "order");
  long limit = 20;
  if (req.has_param("limit")) {
    const std::string v = req.get_param_value("limit");
    char* end = nullptr;
    limit = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || limit < 1 || limit > 100) {
      throw ApiError::bad_request("'limit' must be an integer from 1 to 100", "limit");
    }
  }
  std::vector<ordered_json> items(stored->input_items.begin(), stored->input_items.end());
  if (order == "desc") std::reverse(items.begin(), items.end());
  size_t from = 0;
  if (req.has_param("after")) {
    const std::string after = req.get_param_value("after");
    while (from < items.size() && !(items[from].contains("id") && items[from]["id"].is_string() &&
                                    items[from]["id"].get_ref<const std::string&>() == after)) {
      ++from;
    }
    if (from == items.size()) throw ApiError::bad_request("'after' names no item of this response", "after");
    ++from;
  }
  ordered_json data = ordered_json::array();
  for (size_t i = from; i < items.size() && data.size() < static_cast<size_t>(limit); ++i)
    data.push_back(items[i]);
  const bool more = from + data.size() < items.size();
  send(res, {{"object", "list"},
             {"data", data},
             {"first_id", data.empty() ? ordered_json(nullptr) : data.front()["id"]},
             {"last_id", data.empty() ? ordered_json(nullptr) : data.back()["id"]},
             {"has_more", more}});
}

}  // namespace spark
