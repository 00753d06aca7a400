// Server metrics in Prometheus text format: request and token counters, latency histograms (time to
// first token, time per output token, end-to-end), and the engine's queue and KV cache state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "spark/engine.h"

namespace spark {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void count_http(int status);
  void observe_request(double ttft_s, double e2e_s, int64_t output_tokens);
  void count_disconnect();
  // Where a generation request's session key came from: "header" (X-Session-Id), "user" (the OpenAI
  // `user` field) or "none". Counted only: the key itself is unbounded in number and stays out of metrics.
  void count_session_key(const std::string& source);
  void count_parse_recovery(const std::string& kind);
  // Prometheus exposition text, combining these with the engine's stats.
  std::string render(const EngineStats& engine, const std::string& model_name, const std::string& kernel_isa) const;
  // The process-wide caches requests fill, bounded by count and bytes: compiled grammars and stored
  // /v1/responses objects.
  struct CacheStats {
    size_t grammars = 0, grammar_bytes = 0;
    size_t grammar_refusals = 0, compiles_waiting_for_equal = 0;
    uint64_t grammar_compiles = 0;
    size_t responses = 0, response_bytes = 0;
  };
  static void render_caches(std::string& out, const CacheStats& caches);

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> http_by_status_;
  std::map<std::string, uint64_t> parse_recoveries_;
  uint64_t disconnects_ = 0;
  std::map<std::string, uint64_t> session_keys_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
};

}  // namespace spark
