// One generation shared by the OpenAI endpoints (chat completions, completions, responses): the engine
// requests of its choices, their output pipelines (ChoiceStream), usage, and the chunked HTTP response that
// cancels the requests when the client goes away.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/choice_stream.h"
#include "server/openai_request.h"
#include "server/server_context.h"

namespace httplib {
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace spark {

using Clock = std::chrono::steady_clock;

std::string random_id(const char* prefix);
int64_t unix_now();
std::string dump(const ordered_json& j);
// A request naming another model: 404 as OpenAI answers.
void check_model(const ServerContext& ctx, const std::string& model);
ApiError rejection_error(const EngineRejection& e);

// One generation: the engine handles of its n choices, their output pipelines, and timing.
struct Generation {
  ServerContext& ctx;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<ChoiceStream> streams;
  std::vector<std::vector<TokenEvent>> inbox;
  std::vector<bool> done;
  std::vector<FinishReason> reasons;
  std::vector<int32_t> prompt_ids;
  // Reasoning tokens per choice: counted while its <think> block is open (up to and including </think>).
  int32_t think_end = -1;
  std::vector<bool> in_reasoning;
  std::vector<int64_t> reasoning_tokens;
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
        const bool first =
            steps.empty() && std::all_of(done.begin(), done.begin() + static_cast<std::ptrdiff_t>(i),
                                         [](bool d) { return d; });
        if (handles[i]->wait(inbox[i], std::chrono::milliseconds(first ? 25 : 0)))
          reasons[i] = handles[i]->reason();
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
        count_reasoning(i, inbox[i]);
        s.delta = streams[i].on_tokens(inbox[i]);
        inbox[i].clear();
      }
      if (streams[i].stop_string_hit()) {
        handles[i]->cancel();
        reasons[i] = FinishReason::kStop;
      }
      if (reasons[i] != FinishReason::kNone) {
        if (reasons[i] == FinishReason::kError) {
          if (handles[i]->request_fault()) throw ApiError::bad_request(handles[i]->error());
          throw ApiError(500, "server_error", handles[i]->error());
        }
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

  void count_reasoning(size_t i, const std::vector<TokenEvent>& events) {
    if (i >= in_reasoning.size()) return;
    for (const TokenEvent& ev : events) {
      if (!in_reasoning[i]) return;
      ++reasoning_tokens[i];
      if (ev.token == think_end) in_reasoning[i] = false;
    }
  }

  int64_t total_reasoning_tokens() const {
    int64_t n = 0;
    for (int64_t r : reasoning_tokens) n += r;
    return n;
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
            {"prompt_tokens_details", {{"cached_tokens", cached}}},
            {"completion_tokens_details", json_object_of("reasoning_tokens", total_reasoning_tokens())}};
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

// Submits one engine request per choice; on any refusal, cancels what was already submitted. `thinking`:
// the prompt opened a <think> block (reasoning tokens are counted from the first one).
void submit_all(Generation& g, const CommonRequest& common, const std::vector<int32_t>& prompt,
                const std::function<std::shared_ptr<LogitsProcessor>()>& make_processor,
                const std::function<ChoiceConfig()>& make_config, bool thinking = false);

// The engine's checks of a prompt and its parameters (context length, KV budget, ranges) before the
// request's grammars compile, so a prompt that can never run is a 400 without seconds of compiling first.
void check_before_preparing(const ServerContext& ctx, const std::vector<int32_t>& prompt,
                            const SamplingParams& params);

// max_tokens for a request that gives none: what is left of the context, capped by --default-max-tokens or
// generation_config.json. A prompt that fills the context: ApiError 400 naming `param`.
int default_max_tokens(const ServerContext& ctx, size_t prompt_len, const std::string& param = "messages");

using StepFn = std::function<void(Generation&, std::vector<Generation::Step>&, httplib::DataSink&)>;
using SinkFn = std::function<void(Generation&, httplib::DataSink&)>;
// Runs the generation and cancels its requests when the client goes away. A stream runs inside a chunked
// response (sink.is_writable() notices the client leave); a non-streamed reply runs here, on the handler's
// thread (client_still_connected()), so an error found mid-generation is thrown with its own status rather
// than written into a 200 body. `on_start` (optional) writes the opening events; `on_step` sees each step's
// deltas (streaming, or always with `step_always`); `on_done` writes the final body or the closing events;
// `on_error` (optional) writes a stream's failure in the endpoint's own shape.
void respond(httplib::Response& res, std::shared_ptr<Generation> g, bool stream, StepFn on_step,
             SinkFn on_done, SinkFn on_start = nullptr, bool step_always = false,
             std::function<void(const ApiError&, httplib::DataSink&)> on_error = nullptr);

void write_event(httplib::DataSink& sink, const ordered_json& j);

// Counts the request's session key by source in /metrics (and logs it with --log-requests): for operators
// watching affinity behind a load balancer; never used for routing here.
void note_session_key(ServerContext& ctx, const httplib::Request& req, const ordered_json& body);

}  // namespace spark
