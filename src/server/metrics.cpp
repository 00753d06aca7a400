#include "server/metrics.h"

#include <cstdio>

namespace spark {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void metric(std::string& out, const std::string& name, const char* type, const std::string& help, double value,
            const std::string& labels = {}) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num(value) + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}),
      e2e_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {}

void ServerMetrics::count_http(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_by_status_[status];
}

void ServerMetrics::observe_request(double ttft_s, double e2e_s, int64_t output_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ttft_s >= 0) ttft_.observe(ttft_s);
  e2e_.observe(e2e_s);
  if (output_tokens > 1 && ttft_s >= 0) tpot_.observe((e2e_s - ttft_s) / static_cast<double>(output_tokens - 1));
}

void ServerMetrics::count_session_key(const std::string& source) {
  std::lock_guard<std::mutex> lock(mu_);
  ++session_keys_[source];
}

void ServerMetrics::count_disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
}

void ServerMetrics::count_parse_recovery(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  ++parse_recoveries_[kind];
}

void ServerMetrics::render_caches(std::string& out, const CacheStats& c) {
  metric(out, "spark_grammar_cache_grammars", "gauge", "Compiled grammars kept for reuse.",
         static_cast<double>(c.grammars));
  metric(out, "spark_grammar_cache_bytes", "gauge",
         "Bytes the kept grammars hold, mask caches included (as measured at the last insertion).",
         static_cast<double>(c.grammar_bytes));
  metric(out, "spark_grammar_compiles_total", "counter",
         "Grammars built for structured outputs and strict tools (not served from a cache).",
         static_cast<double>(c.grammar_compiles));
  metric(out, "spark_grammar_refusals_cached", "gauge",
         "Refused structured-output specs kept, answered again without a compile.",
         static_cast<double>(c.grammar_refusals));
  metric(out, "spark_grammar_compiles_waiting_for_equal", "gauge",
         "Requests waiting for another request's compile of the same spec.",
         static_cast<double>(c.compiles_waiting_for_equal));
  metric(out, "spark_responses_store_objects", "gauge", "Stored /v1/responses objects.",
         static_cast<double>(c.responses));
  metric(out, "spark_responses_store_bytes", "gauge", "JSON bytes of the stored /v1/responses objects.",
         static_cast<double>(c.response_bytes));
}

std::string ServerMetrics::render(const EngineStats& e, const std::string& model_name, const std::string& kernel_isa) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  metric(out, "spark_model_info", "gauge", "Served model and kernel instruction set.", 1,
         "model_name=\"" + model_name + "\",isa=\"" + kernel_isa + "\"");
  metric(out, "spark_requests_submitted_total", "counter", "Requests accepted by the engine.", e.requests_submitted);
  metric(out, "spark_requests_finished_total", "counter", "Requests finished (any reason).", e.requests_finished);
  metric(out, "spark_requests_cancelled_total", "counter", "Requests cancelled (client gone or stop string).",
         e.requests_cancelled);
  metric(out, "spark_requests_rejected_total", "counter", "Requests refused at submission.", e.requests_rejected);
  metric(out, "spark_client_disconnects_total", "counter", "Clients that disconnected before the end.", disconnects_);
  metric(out, "spark_prompt_tokens_total", "counter", "Prompt tokens received.", e.prompt_tokens);
  metric(out, "spark_prompt_tokens_computed_total", "counter", "Prompt tokens run through the model.",
         e.computed_prompt_tokens);
  metric(out, "spark_generation_tokens_total", "counter", "Tokens generated.", e.generated_tokens);
  metric(out, "spark_prefix_cache_queries_total", "counter", "Prefix cache lookups.", e.prefix_cache_queries);
  metric(out, "spark_prefix_cache_hits_total", "counter", "Prefix cache lookups that hit.", e.prefix_cache_hits);
  metric(out, "spark_prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache.",
         e.prefix_cache_hit_tokens);
  metric(out, "spark_prefix_cache_queried_tokens_total", "counter",
         "Prompt tokens looked up in the prefix cache.", e.prefix_cache_queried_tokens);
  metric(out, "spark_prefix_cache_hit_rate", "gauge",
         "Prompt tokens served from the prefix cache / tokens looked up.",
         e.prefix_cache_queried_tokens > 0 ? static_cast<double>(e.prefix_cache_hit_tokens) /
                                                 static_cast<double>(e.prefix_cache_queried_tokens)
                                           : 0.0);
  metric(out, "spark_prefix_cache_entries", "gauge", "Cached KV blocks.",
         static_cast<double>(e.prefix_cache_entries));
  metric(out, "spark_prefix_cache_sliding_entries", "gauge",
         "Cached KV blocks that also hold their sliding layers.",
         static_cast<double>(e.prefix_cache_sliding_entries));
  metric(out, "spark_prefix_cache_bytes", "gauge",
         "KV cache bytes held only by the prefix cache (evictable).",
         static_cast<double>(e.prefix_cache_bytes));
  metric(out, "spark_prefix_cache_evictions_total", "counter", "Cached blocks evicted.",
         e.prefix_cache_evicted_blocks);
  metric(out, "spark_prefix_cache_sliding_evictions_total", "counter",
         "Sliding blocks dropped from cached blocks no resume point needed.",
         e.prefix_cache_evicted_sliding_blocks);
  metric(out, "spark_prefix_cache_pages", "gauge", "KV cache pages only the prefix cache holds.",
         static_cast<double>(e.prefix_cache_pages));
  metric(out, "spark_preemptions_total", "counter", "Sequences preempted for lack of KV cache.", e.preemptions);
  metric(out, "spark_engine_steps_total", "counter", "Engine steps run.", e.steps);
  metric(out, "spark_num_requests_waiting", "gauge", "Requests in the queue.", e.waiting);
  metric(out, "spark_num_requests_running", "gauge", "Requests being generated.", e.running);
  metric(out, "spark_kv_cache_usage_ratio", "gauge", "Fraction of KV cache pages in use.",
         e.kv_pages_total > 0 ? static_cast<double>(e.kv_pages_used) / static_cast<double>(e.kv_pages_total) : 0.0);
  metric(out, "spark_kv_cache_pages_used", "gauge", "KV cache pages in use.", static_cast<double>(e.kv_pages_used));
  metric(out, "spark_kv_cache_bytes", "gauge", "KV cache bytes allocated.", static_cast<double>(e.kv_bytes_allocated));
  out += "# HELP spark_http_responses_total HTTP responses by status.\n# TYPE spark_http_responses_total counter\n";
  for (const auto& [status, n] : http_by_status_) {
    out += "spark_http_responses_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP spark_tool_parse_recoveries_total Malformed tool calls recovered, by kind.\n"
         "# TYPE spark_tool_parse_recoveries_total counter\n";
  for (const auto& [kind, n] : parse_recoveries_) {
    out += "spark_tool_parse_recoveries_total{kind=\"" + kind + "\"} " + std::to_string(n) + "\n";
  }
  out +=
      "# HELP spark_session_key_requests_total Generation requests by where their session key came from.\n"
      "# TYPE spark_session_key_requests_total counter\n";
  for (const char* source : {"header", "user", "previous_response_id", "none"}) {
    const auto it = session_keys_.find(source);
    out += std::string("spark_session_key_requests_total{source=\"") + source + "\"} " +
           std::to_string(it == session_keys_.end() ? 0 : it->second) + "\n";
  }
  ttft_.render(out, "spark_time_to_first_token_seconds", "Time from request to first token.");
  tpot_.render(out, "spark_time_per_output_token_seconds", "Mean time between output tokens, per request.");
  e2e_.render(out, "spark_e2e_request_latency_seconds", "Time from request to last token.");
  return out;
}

}  // namespace spark
