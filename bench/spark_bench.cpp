// spark-bench: llama-bench-style measurements of prefill (ppN), decode (tgN) and concurrent generation
// (concN) with medians over repetitions, the kernel path, load time and anonymous memory; and the prefix
// cache serving new sessions that share a long prefix (--shared-prefix N --sessions S); with --json-schema,
// each --concurrency run again with every sequence held to the schema by the server's grammar path; with
// --vs-greedy, each --concurrency run both greedy and with the given sampling.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "bench_report.h"
#include "cpu/cpu_features.h"
#include "gemm/dispatch.h"
#include "grammar/json_validate.h"
#include "grammar/matcher.h"
#include "model/spark_model.h"
#include "model/synthetic_checkpoint.h"
#include "roofline/roofline.h"
#include "server/logits_processors.h"
#include "server/structured_output.h"
#include "spark/engine.h"
#include "spark/error.h"
#include "step_profile.h"
#include "tokenizer/tokenizer.h"
#include "util/process_memory.h"
#include "util/text_file.h"

// The commit this binary was built from (bench/CMakeLists.txt writes it at every build).
const char* spark_git_commit();

namespace spark {

namespace {

using Clock = std::chrono::steady_clock;

// Sampling of the --concurrency runs; the defaults are greedy decoding with nothing else. The request's
// own parameters, but for logit_bias: its ids are drawn per run.
struct BenchSampling {
  SamplingParams params = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();
  int logit_bias_ids = 0;  // this many random token ids get a bias of +1 (0: no logit_bias)
};

struct BenchOptions {
  std::string model_dir;
  std::string random_weights;
  std::vector<std::string> quants = {"none"};
  std::vector<int> threads;
  int n_prompt = 512;
  int n_gen = 128;
  int depth = 0;  // tgN after this many prompt tokens already in the KV cache
  int reps = 5;
  std::vector<int> concurrency;
  int conc_prompt = 128;
  int conc_gen = 128;
  std::string output = "md";
  std::string plot;
  uint64_t seed = 1;
  bool roofline = false;
  bool of_ceiling = false;    // measure the ceilings around the runs; each pp / tg row beside its own
  int shared_prefix = 0;      // tokens every session shares (0: skip)
  std::vector<int> sessions;  // sessions arriving together, one run per count
  int session_tokens = 32;    // each session's own tokens after the shared prefix
  // Sampling of the --concurrency runs (greedy by default), so they measure what users run.
  BenchSampling sampling;
  bool vs_greedy = false;              // each --concurrency run also greedy, alternating with `sampling`
  std::string json_schema;             // a schema file: each --concurrency run also constrained by it
  std::string tokenizer_dir;           // tokenizer.json for the constraint (default: -m's folder)
  std::string schema_texts;            // write the constrained runs' texts here (JSON lines)
  std::string kv_cache_dtype = "f32";  // K/V element type of every KV pool and engine the bench makes
  bool profile = false;                // tgN: where each decode step's time goes (StepProfile)
};

// " T=1 top_p=0.95" and the like: how a --concurrency row sampled, beside its test name.
std::string sampling_label(const BenchSampling& bench) {
  const SamplingParams& o = bench.params;
  auto num = [](float v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  std::string label;
  if (o.temperature > 0.0f) {
    label = " T=" + num(o.temperature);
    if (o.top_p < 1.0f) label += " top_p=" + num(o.top_p);
    if (o.top_k > 0) label += " top_k=" + std::to_string(o.top_k);
    if (o.min_p > 0.0f) label += " min_p=" + num(o.min_p);
  }
  // Penalties, biases and logprobs apply to greedy decoding too.
  if (o.presence_penalty != 0.0f) label += " presence=" + num(o.presence_penalty);
  if (o.frequency_penalty != 0.0f) label += " frequency=" + num(o.frequency_penalty);
  if (o.repetition_penalty != 1.0f) label += " repetition=" + num(o.repetition_penalty);
  if (bench.logit_bias_ids > 0) label += " logit_bias=" + std::to_string(bench.logit_bias_ids);
  if (o.logprobs >= 0) label += " logprobs=" + std::to_string(o.logprobs);
  return label;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<int32_t> random_tokens(int n, int vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(14, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = dist(rng);
  return t;
}

struct Stats {
  double median, min, max;
};

Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

// One --shared-prefix run: S new sessions (prefix + own tokens, one token generated) submitted together
// to an engine with an empty cache, then one more session once they are done.
struct SharedPrefixRow {
  std::string quant;
  int threads = 0;
  int sessions = 0;
  // TTFT seconds: the first session, every later one, a new session after all of them, and a session's
  // own tokens prefilled alone (no prefix) for comparison.
  Stats first{}, later{}, warm{}, own{};
  int64_t prompt_tokens = 0;    // of the S sessions, summed
  int64_t computed_tokens = 0;  // of them, run through the model (median over repetitions)
  int64_t cached_tokens = 0;    // of them, served from the cache (median over repetitions)
  // The samples behind the medians, one repetition's after another (run_shared_prefix appends).
  std::vector<double> first_s, later_s, warm_s, own_s, computed_s, cached_s;
};

void progress(const std::string& what) {
  std::fprintf(stderr, "spark-bench: %s\n", what.c_str());
}

// Runs `once` reps + 1 times (the first is a warm-up), returning tokens/s of the timed ones.
std::vector<double> repeat(int reps, const std::string& label, const std::function<double()>& once) {
  std::vector<double> rates;
  for (int r = 0; r <= reps; ++r) {
    const double rate = once();
    progress(label + (r == 0 ? " warm-up" : " rep " + std::to_string(r) + "/" + std::to_string(reps)) + ": " +
             std::to_string(rate) + " t/s");
    if (r > 0) rates.push_back(rate);
  }
  return rates;
}

// --random-weights: a config.json path, else the name of a built-in config.
std::string random_weights_config(const std::string& arg) {
  return std::filesystem::exists(arg) ? read_text_file(arg) : builtin_config(arg);
}

// FLOP per prompt token: every projection's multiply-adds. The embedding is a lookup, and prefill runs the
// output head for one row per sequence, not per token, so neither counts.
double prompt_flop_per_token(const ModelConfig& cfg) {
  int64_t params = 0;
  for (const ExpectedTensor& e : expected_tensors(cfg)) {
    if (e.name == "model.embedding.weight" || e.name == "lm_head.weight") continue;
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    params += n;
  }
  return 2.0 * static_cast<double>(params);
}

// --of-ceiling: what the row's test can reach on this machine. Decode reads every weight once per token
// (the model's own weight bytes, as loaded); prefill is bounded by the peak of the instructions the
// active tier's prefill kernel multiplies with. Concurrency rows mix both and get none.
void set_ceiling(BenchRow& row, const kernels::Roofline& r, const SparkModel& model, bool bf16_act,
                 double flop_per_token) {
  if (row.test.rfind("tg", 0) == 0) {
    // Untied embeddings: decode looks up one row of the table, the output head is read whole.
    double bytes = static_cast<double>(model.weight_bytes());
    if (!model.config().tie_word_embeddings) {
      for (const auto& [name, w] : model.linear_weights()) {
        if (name == "model.embedding") bytes -= static_cast<double>(w->bytes());
      }
    }
    row.ceiling_basis = "read " + std::to_string(static_cast<int>(std::lround(r.read_gbps))) + " GB/s";
    // After a deep prompt each token also reads the sequence's K/V.
    if (row.test.find(" @ d") != std::string::npos) {
      bytes += static_cast<double>(row.kv_bytes);
      row.ceiling_basis += ", weights + KV";
    }
    row.ceiling_tokens_per_s = r.read_gbps * 1e9 / bytes;
  } else if (row.test.rfind("pp", 0) == 0) {
    // The kernel the prompt's row count selects (AMX, for one, only from some rows up).
    const kernels::Arithmetic a =
        kernels::describe_gemm(model.weight_format(), row.n_prompt, kernels::active_isa(), bf16_act)
            .arithmetic;
    const double peak = kernels::arithmetic_peak(r, a);
    if (peak <= 0) return;
    row.ceiling_tokens_per_s = peak * 1e9 / flop_per_token;
    row.ceiling_basis = std::string(kernels::arithmetic_name(a)) + " " +
                        std::to_string(static_cast<int>(std::lround(peak))) + " G/s";
  }
}

// Measured read bandwidth and arithmetic peaks, and what they allow for this model in each format:
// decode reads every weight once per token; prefill does 2 FLOP per weight per token.
int run_roofline(const BenchOptions& o) {
  const std::string text = !o.random_weights.empty() ? random_weights_config(o.random_weights)
                           : !o.model_dir.empty()
                               ? read_text_file(std::filesystem::path(o.model_dir) / "config.json")
                               : builtin_config("spark-x2.5-1.7b");
  const ModelConfig cfg = parse_model_config(text, "config");
  const double flop_per_token = prompt_flop_per_token(cfg);
  std::printf(
      "| threads | read GB/s | f32 FMA GFLOP/s | int8 GOP/s | format | decode ceiling t/s | prefill peak "
      "G/s | prefill ceiling t/s |\n");
  std::printf("|---:|---:|---:|---:|---|---:|---|---:|\n");
  for (int threads : o.threads) {
    ThreadPool pool(threads);
    const kernels::Roofline r = kernels::measure_roofline(pool);
    for (const std::string name : {"bf16", "bf16act", "int8", "w4a8", "w4a16"}) {
      const bool bf16_act = name == "bf16act";  // bf16 weights with --bf16-activations
      const kernels::WeightFormat f = kernels::parse_weight_format(bf16_act ? "bf16" : name);
      double bytes = 0;
      for (const ExpectedTensor& e : expected_tensors(cfg)) {
        if (e.shape.size() < 2) {
          bytes += 4.0 * static_cast<double>(e.shape[0]);  // norms stay f32
          continue;
        }
        // The tied embedding is read once for the output head; its lookup row is negligible.
        bytes += kernels::bits_per_weight(f, e.shape[0], e.shape[1]) / 8.0 *
                 static_cast<double>(e.shape[0] * e.shape[1]);
      }
      // Prefill is bounded by the instructions the active tier's prefill kernel multiplies with.
      const kernels::Arithmetic arithmetic =
          kernels::describe_gemm(f, 512, kernels::active_isa(), bf16_act).arithmetic;
      const double peak = kernels::arithmetic_peak(r, arithmetic);
      std::printf("| %d | %.1f | %.0f | %.0f | %s | %.1f | %s %.0f | %.1f |\n", threads, r.read_gbps,
                  r.fma_gflops, r.int8_gops, name.c_str(), r.read_gbps * 1e9 / bytes,
                  kernels::arithmetic_name(arithmetic), peak, peak * 1e9 / flop_per_token);
    }
  }
  std::printf(
      "\n%s: %.3f GFLOP per prompt token (the output head runs once per sequence); decode ceiling = read "
      "bandwidth / weight bytes, prefill ceiling = peak / FLOP per prompt token (kernels at tier %s)\n",
      cfg.model_type.c_str(), flop_per_token / 1e9, kernels::isa_name(kernels::active_isa()));
  // How fast the AMX tiles can be fed: the 2 x 2 tile step with its four operand tiles loaded every round
  // from buffers that live in L1, L2, the last-level cache and memory (1 thread). The AMX kernels' tiles
  // stream from L2 (activations) and, on a weight's first use, from memory.
  if (kernels::measure_amx_int8_fed(16 << 10, 1) > 0.0) {
    // The tile unit's rate varies from run to run on a shared machine, so each fed rate is paired with a
    // peak measured just before it; the fraction is the median over five pairs.
    const size_t llc = kernels::last_level_cache_bytes();
    ThreadPool one(1);
    std::printf(
        "\nAMX int8, 1 thread, operand tiles loaded every round (fraction: of the rate with operands held "
        "in tiles, measured just before)\n| buffer | GOP/s | of the held-operand rate |\n|---|---:|---:|\n");
    for (size_t bytes : {size_t{16} << 10, size_t{512} << 10, llc > 0 ? llc / 2 : size_t{16} << 20,
                         std::max(size_t{512} << 20, 4 * llc)}) {
      std::vector<double> fed, fraction;
      for (int rep = 0; rep < 5; ++rep) {
        const double peak = kernels::measure_amx_int8_peak(one, 1);
        fed.push_back(kernels::measure_amx_int8_fed(bytes, 1));
        fraction.push_back(fed.back() / peak);
      }
      std::sort(fed.begin(), fed.end());
      std::sort(fraction.begin(), fraction.end());
      std::printf("| %zu KiB | %.0f | %.0f%% |\n", bytes >> 10, fed[2], 100.0 * fraction[2]);
    }
  }
  return 0;
}

// Submits the prompts together and returns each one's time to first token (seconds) and, through the
// out-parameters, the prompt tokens computed and served from the cache.
std::vector<double> ttft_of(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                            int64_t& computed, int64_t& cached) {
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<double> ttft(prompts.size(), 0.0);
  const auto t = Clock::now();
  for (const auto& p : prompts) {
    GenerationRequest req;
    req.prompt = p;
    req.params.temperature = 0;
    req.params.max_tokens = 1;
    req.params.ignore_eos = true;
    handles.push_back(engine.submit(std::move(req)));
  }
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < handles.size(); ++i) {
    waiters.emplace_back([&, i] {
      std::vector<TokenEvent> ev;
      for (;;) {
        const bool done = handles[i]->wait(ev, std::chrono::milliseconds(100));
        if (!ev.empty() && ttft[i] == 0.0) ttft[i] = seconds_since(t);
        if (done) break;
      }
    });
  }
  for (auto& w : waiters) w.join();
  for (auto& h : handles) {
    if (h->reason() == FinishReason::kError) throw Error("shared-prefix session failed: " + h->error());
    computed += h->computed_prompt_tokens();
    cached += h->cached_prompt_tokens();
  }
  return ttft;
}

// Runs `reps` more repetitions into `row` (whose quant, threads and sessions are set) and summarizes
// all of its samples so far.
void run_shared_prefix(const BenchOptions& o, const std::shared_ptr<SparkModel>& model, int reps,
                       SharedPrefixRow& row, std::mt19937& rng) {
  const ModelConfig& cfg = model->config();
  const int threads = row.threads, sessions = row.sessions;
  // Room for every session at once plus the cache's blocks (full and sliding) of all of them.
  KvPagePool probe(cfg, 16, 0, false, parse_kv_cache_dtype(o.kv_cache_dtype));
  const int64_t tokens = o.shared_prefix + o.session_tokens + 16;
  const int64_t blocks = (tokens + 15) / 16;
  const int64_t pages = (sessions + 1) * (probe.ring_pages() + blocks * (1 + probe.slide_pages_per_block()));
  std::vector<double>& first = row.first_s;
  std::vector<double>& later = row.later_s;
  std::vector<double>& warm = row.warm_s;
  std::vector<double>& own = row.own_s;
  std::vector<double>& computed = row.computed_s;
  std::vector<double>& cached = row.cached_s;
  // No warm-up run: the weights are loaded and resident, and every repetition starts a fresh engine.
  for (int r = 1; r <= reps; ++r) {
    EngineOptions eo;
    eo.threads = threads;
    eo.max_num_seqs = std::max(64, sessions + 1);
    eo.max_queued_requests = std::max(256, sessions + 1);
    eo.kv_cache_memory_bytes = pages * probe.page_bytes();
    eo.kv_cache_dtype = o.kv_cache_dtype;
    Engine engine(model, eo);
    const auto prefix = random_tokens(o.shared_prefix, cfg.vocab_size, rng);
    auto session = [&] {
      auto p = prefix;
      const auto mine = random_tokens(o.session_tokens, cfg.vocab_size, rng);
      p.insert(p.end(), mine.begin(), mine.end());
      return p;
    };
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < sessions; ++i) prompts.push_back(session());
    int64_t c = 0, k = 0;
    const auto t = ttft_of(engine, prompts, c, k);
    int64_t c2 = 0, k2 = 0;
    const double w = ttft_of(engine, {session()}, c2, k2)[0];
    const double alone = ttft_of(engine, {random_tokens(o.session_tokens, cfg.vocab_size, rng)}, c2, k2)[0];
    progress("shared-prefix " + std::to_string(o.shared_prefix) + " x" + std::to_string(sessions) +
             " t=" + std::to_string(threads) + " rep " + std::to_string(first.size() + 1) + ": first " +
             std::to_string(t[0]) + " s, computed " + std::to_string(c) + " of " +
             std::to_string(sessions * (o.shared_prefix + o.session_tokens)) +
             " prompt tokens, next session " + std::to_string(w) + " s");
    // The first submitted session computes the prefix; the others wait for its blocks.
    first.push_back(t[0]);
    later.insert(later.end(), t.begin() + 1, t.end());
    warm.push_back(w);
    own.push_back(alone);
    computed.push_back(static_cast<double>(c));
    cached.push_back(static_cast<double>(k));
  }
  row.first = summarize(first);
  if (!later.empty()) row.later = summarize(later);
  row.warm = summarize(warm);
  row.own = summarize(own);
  row.prompt_tokens = static_cast<int64_t>(sessions) * (o.shared_prefix + o.session_tokens);
  row.computed_tokens = static_cast<int64_t>(summarize(computed).median);
  row.cached_tokens = static_cast<int64_t>(summarize(cached).median);
}

// The same own tokens timed three ways at the model level (no engine), to say what "its own tokens"
// cost at their position: (a) in place, the last chunk of one sequence whose prefix was just computed in
// 512-token chunks as the engine does (capturing sliding blocks as the engine does); (b) resumed, a fresh
// sequence adopting those blocks (SequenceKv::adopt_prefix, the prefix cache's resume) then computing
// them; (c) alone at position 0. (b) and (c) are repeated `inner` times per repetition; (a) once, since
// each needs a whole prefix computed.
struct OwnTokensRow {
  int threads = 0;
  Stats in_place{}, resumed{}, adopt{}, alone{};
  int samples_in_place = 0, samples_other = 0;
  std::vector<double> in_place_s, resumed_s, adopt_s, alone_s;  // the samples, appended per repetition
  // Per repetition: the engine's next new session (SharedPrefixRow::warm) over (a) of the same repetition.
  std::vector<double> engine_over_in_place;
};

// Runs `reps` more repetitions into `row` (whose threads is set) and summarizes all its samples so far.
void run_own_tokens(const BenchOptions& o, const std::shared_ptr<SparkModel>& model, ThreadPool& pool,
                    int reps, OwnTokensRow& row, std::mt19937& rng) {
  const ModelConfig& cfg = model->config();
  constexpr int64_t kChunk = 512;  // EngineOptions::max_num_batched_tokens
  constexpr int kInner = 3;
  KvPagePool kv_pool(cfg, 16, 0, false, parse_kv_cache_dtype(o.kv_cache_dtype));
  const int64_t bs = kv_pool.block_size();
  std::vector<float> logits;
  // Capture pages for every block positions [from, to) touch, as Engine's prepare_capture gives them.
  auto capture = [&](SequenceKv& kv, int64_t from, int64_t to) {
    for (int64_t b = from / bs; b <= (to - 1) / bs; ++b) {
      if (kv.capturing(b) || kv_pool.slide_pages_per_block() == 0) continue;
      std::vector<int> pages;
      for (int i = 0; i < kv_pool.slide_pages_per_block(); ++i) pages.push_back(kv_pool.allocate());
      kv.set_capture(b, std::move(pages));
    }
  };
  auto step = [&](SequenceKv& kv, const int32_t* tokens, int64_t n, LogitsMode mode) {
    if (!kv.reserve(kv.num_tokens() + n)) throw Error("own-tokens bench: KV reserve failed");
    capture(kv, kv.num_tokens(), kv.num_tokens() + n);
    SequenceChunk chunk{&kv, tokens, n, mode};
    model->forward(std::span<const SequenceChunk>(&chunk, 1), logits, pool);
  };
  const int threads = row.threads;
  std::vector<double>& in_place = row.in_place_s;
  std::vector<double>& resumed = row.resumed_s;
  std::vector<double>& adopt = row.adopt_s;
  std::vector<double>& alone = row.alone_s;
  const int64_t n_prefix = o.shared_prefix / bs * bs;
  for (int r = 1; r <= reps; ++r) {
    const auto prefix = random_tokens(static_cast<int>(n_prefix), cfg.vocab_size, rng);
    const auto mine = random_tokens(o.session_tokens, cfg.vocab_size, rng);
    SequenceKv a(kv_pool);
    for (int64_t p = 0; p < n_prefix; p += kChunk) {
      step(a, prefix.data() + p, std::min(kChunk, n_prefix - p), LogitsMode::kNone);
    }
    // The prefix's sliding blocks, as the cache would hold them.
    std::vector<std::vector<int>> slide;
    std::vector<const int*> slide_ptrs;
    for (int64_t b = 0; b < n_prefix / bs; ++b) slide.push_back(a.take_capture(b));
    for (const auto& v : slide) slide_ptrs.push_back(v.empty() ? nullptr : v.data());
    const std::vector<int> blocks(a.blocks().begin(), a.blocks().begin() + n_prefix / bs);
    auto t = Clock::now();
    step(a, mine.data(), o.session_tokens, LogitsMode::kLast);
    in_place.push_back(seconds_since(t));
    for (int i = 0; i < kInner; ++i) {
      SequenceKv b(kv_pool);
      t = Clock::now();
      if (!b.adopt_prefix(blocks, slide_ptrs, &pool)) throw Error("own-tokens bench: adopt_prefix failed");
      adopt.push_back(seconds_since(t));
      step(b, mine.data(), o.session_tokens, LogitsMode::kLast);
      resumed.push_back(seconds_since(t));
      SequenceKv c(kv_pool);
      t = Clock::now();
      step(c, mine.data(), o.session_tokens, LogitsMode::kLast);
      alone.push_back(seconds_since(t));
    }
    for (const auto& v : slide) {
      for (int page : v) kv_pool.release(page);
    }
    progress("own tokens after " + std::to_string(n_prefix) + " t=" + std::to_string(threads) + " rep " +
             std::to_string(in_place.size()) + ": in place " + std::to_string(in_place.back()) +
             " s, resumed " + std::to_string(resumed.back()) + " s, alone " + std::to_string(alone.back()) +
             " s");
  }
  row.in_place = summarize(in_place);
  row.resumed = summarize(resumed);
  row.adopt = summarize(adopt);
  row.alone = summarize(alone);
  row.samples_in_place = static_cast<int>(in_place.size());
  row.samples_other = static_cast<int>(resumed.size());
}

std::string format_own_tokens(const std::vector<OwnTokensRow>& rows,
                              const std::vector<SharedPrefixRow>& shared, const BenchOptions& o) {
  std::ostringstream out;
  char buf[512];
  out << "\n### Own tokens at their position: " << o.session_tokens << " tokens after a " << o.shared_prefix
      << "-token prefix, medians [min-max]\n\n";
  out << "| threads | (a) in place (s) | (b) resumed from cache (s) | of which adopt (s) | (c) alone at 0 "
         "(s) | "
         "b / a | engine: next new session (s) / a | same repetition: engine / a, median [min-max] |\n";
  out << "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    double engine_warm = 0.0;
    for (const auto& s : shared) {
      if (s.threads == r.threads && engine_warm == 0.0) engine_warm = s.warm.median;
    }
    std::string paired = "-";
    if (!r.engine_over_in_place.empty()) {
      const Stats p = summarize(r.engine_over_in_place);
      char b[64];
      std::snprintf(b, sizeof b, "%.2f [%.2f-%.2f]", p.median, p.min, p.max);
      paired = b;
    }
    std::snprintf(
        buf, sizeof buf,
        "| %d | %.3f [%.3f-%.3f] | %.3f [%.3f-%.3f] | %.4f | %.3f [%.3f-%.3f] | %.2f | %.3f / %.2f | %s |\n",
        r.threads, r.in_place.median, r.in_place.min, r.in_place.max, r.resumed.median, r.resumed.min,
        r.resumed.max, r.adopt.median, r.alone.median, r.alone.min, r.alone.max,
        r.resumed.median / r.in_place.median, engine_warm, engine_warm / r.in_place.median, paired.c_str());
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "\n(a): %d samples, (b) and (c): %d samples per thread count.\n",
                rows.empty() ? 0 : rows[0].samples_in_place, rows.empty() ? 0 : rows[0].samples_other);
  out << buf;
  return out.str();
}

std::string format_shared_prefix(const std::vector<SharedPrefixRow>& rows, const BenchOptions& o,
                                 const std::string& desc) {
  std::ostringstream out;
  char buf[512];
  out << "\n### Shared prefix: " << desc << ", prefix " << o.shared_prefix << " tokens + " << o.session_tokens
      << " own tokens per session, 1 token generated, median of " << o.reps << "\n\n";
  out << "| quant | threads | sessions | TTFT first (s) | TTFT later, median [max] (s) | next new session "
         "(s) | "
         "own tokens alone (s) | prompt tokens computed / total | cached |\n";
  out << "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    std::string later = "-";
    if (r.sessions > 1) {
      std::snprintf(buf, sizeof buf, "%.2f [%.2f]", r.later.median, r.later.max);
      later = buf;
    }
    std::snprintf(buf, sizeof buf, "| %s | %d | %d | %.2f | %s | %.2f | %.2f | %lld / %lld | %lld |\n",
                  r.quant.c_str(), r.threads, r.sessions, r.first.median, later.c_str(), r.warm.median,
                  r.own.median, static_cast<long long>(r.computed_tokens),
                  static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.cached_tokens));
    out << buf;
  }
  return out.str();
}

int run(const BenchOptions& o) {
  if (o.roofline) return run_roofline(o);
  if (o.model_dir.empty() == o.random_weights.empty())
    throw Error("give exactly one of -m DIR or --random-weights CONFIG");
  for (const auto& q : o.quants) {
    ModelOptions check;
    parse_quant_option(q == "bf16act" ? "bf16" : q, "speed", check);  // reject unknown names before the load
  }
  const int max_threads = *std::max_element(o.threads.begin(), o.threads.end());

  // Load, sampling RssAnon meanwhile for its peak.
  std::atomic<bool> loading{true};
  std::atomic<int64_t> peak{read_process_memory().rss_anon_bytes};
  std::thread sampler([&] {
    while (loading.load()) {
      peak = std::max<int64_t>(peak.load(), read_process_memory().rss_anon_bytes);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // A load that throws (a missing folder, an unknown shape) must end the sampler before the error leaves:
  // a joinable thread's destructor calls std::terminate.
  struct StopSampler {
    std::atomic<bool>& loading;
    std::thread& sampler;
    ~StopSampler() {
      loading = false;
      if (sampler.joinable()) sampler.join();
    }
  } stop_sampler{loading, sampler};
  const auto t0 = Clock::now();
  std::shared_ptr<const Checkpoint> checkpoint;
  std::string desc;
  {
    ThreadPool load_pool(max_threads);
    if (!o.model_dir.empty()) {
      checkpoint = std::make_shared<const Checkpoint>(o.model_dir);
      desc = o.model_dir;
    } else {
      checkpoint = make_random_checkpoint(random_weights_config(o.random_weights), o.seed, load_pool);
      const bool file = std::filesystem::exists(o.random_weights);
      desc = (file ? std::filesystem::path(o.random_weights).filename().string() : o.random_weights) +
             " (random weights)";
    }
  }
  const int64_t max_len = std::max({o.n_prompt + o.n_gen, o.depth + (o.reps + 1) * o.n_gen,
                                    o.conc_prompt + o.conc_gen, o.shared_prefix + 2 * o.session_tokens}) +
                          16;
  const double load_s = seconds_since(t0);
  loading = false;
  sampler.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int64_t settled = read_process_memory().rss_anon_bytes;
  peak = std::max<int64_t>(peak.load(), settled);
  const ModelConfig& cfg = checkpoint->config();
  progress("loaded " + desc + " in " + std::to_string(load_s) + " s");

  // --json-schema: the server's path from a schema to a logits processor (vocabulary without added
  // tokens, compiled and cached grammar, budget-steered masks).
  std::shared_ptr<const grammar::CompiledGrammar> schema_grammar;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::ordered_json schema;
  const int eos = cfg.eos_token_id;
  if (!o.json_schema.empty()) {
    const std::string dir = !o.tokenizer_dir.empty() ? o.tokenizer_dir : o.model_dir;
    if (dir.empty()) throw Error("--json-schema with --random-weights needs --tokenizer DIR");
    tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir));
    StructuredOutput so;
    so.kind = StructuredOutput::Kind::kJsonSchema;
    so.spec = read_text_file(o.json_schema);
    so.param = "--json-schema";
    schema = nlohmann::ordered_json::parse(so.spec);
    const auto t = Clock::now();
    schema_grammar = compile_structured_output(
        so, make_grammar_vocab(*tokenizer, cfg.vocab_size,
                               std::vector<int32_t>(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end())));
    progress("compiled " + o.json_schema + " in " + std::to_string(seconds_since(t)) + " s");
  }
  std::vector<std::string> comparison_lines;
  int valid_outputs = 0, checked_outputs = 0, invalid_total = 0;
  std::ofstream texts_out;
  if (!o.schema_texts.empty()) texts_out.open(o.schema_texts);
  // Every constrained text must parse and be valid for the schema.
  auto check_schema_outputs = [&](const std::vector<std::vector<int32_t>>& outputs, int n, int threads) {
    for (const auto& ids : outputs) {
      const std::string text = tokenizer->decode(ids);
      bool valid = false;
      try {
        valid = grammar::json_valid(nlohmann::ordered_json::parse(text), schema, schema);
      } catch (const std::exception&) {
        valid = false;
      }
      ++checked_outputs;
      if (valid)
        ++valid_outputs;
      else
        ++invalid_total;
      if (texts_out.is_open()) {
        nlohmann::ordered_json line = {
            {"concurrency", n}, {"threads", threads}, {"text", text}, {"valid", valid}};
        texts_out << line.dump() << "\n";
      }
    }
  };
  auto fixed = [](double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return std::string(buf);
  };

  // --of-ceiling: the ceilings of each thread count, measured before any run and again after each
  // format's runs (never during them, so the model's runs do not share the machine with the measurement).
  // A row is held to the higher of the last measurement at its thread count before its format's runs and
  // the one right after them (with one thread count, just before and just after it): on a shared host a
  // measurement taken while other tenants read memory comes out low (one read 38 GB/s where the machine
  // gives 70-80), and put a decode row at 106% of its "ceiling".
  std::map<int, kernels::Roofline> ceilings;
  if (o.of_ceiling && (o.n_prompt > 0 || o.n_gen > 0)) {
    for (int threads : o.threads) {
      ThreadPool pool(threads);
      ceilings[threads] = kernels::measure_roofline(pool);
      progress("ceilings at " + std::to_string(threads) + " threads: read " +
               std::to_string(ceilings[threads].read_gbps) + " GB/s");
    }
  }
  const double flop_per_token = prompt_flop_per_token(cfg);

  std::vector<BenchRow> rows;
  std::vector<std::string> profile_tables;
  std::vector<SharedPrefixRow> shared_rows;
  std::vector<OwnTokensRow> own_rows;
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  for (const std::string& quant : o.quants) {
    ModelOptions mo;
    mo.max_model_len = max_len;
    // "bf16act": bf16 weights with --bf16-activations, so both can be measured in one run.
    mo.bf16_activations = quant == "bf16act";
    parse_quant_option(mo.bf16_activations ? "bf16" : quant, "speed", mo);
    std::shared_ptr<SparkModel> model;
    {
      ThreadPool quant_pool(max_threads);
      model = std::make_shared<SparkModel>(checkpoint, mo, quant_pool);
    }
    const std::string format =
        std::string(kernels::weight_format_name(model->weight_format())) + (mo.bf16_activations ? "act" : "");
    // The row's label names AVX-VNNI when the dispatcher's kernel for this format uses it (the AVX2 tier's
    // integer tiles on a CPU with it, unless SPARK_DISABLE_CPU_FEATURES=avx_vnni).
    const bool avx_vnni =
        kernels::describe_gemm(model->weight_format(), 512, kernels::active_isa(), mo.bf16_activations)
            .kernel.find("avx-vnni") != std::string::npos;
    const std::string kernel_path = std::string(kernels::isa_name(kernels::active_isa())) +
                                    (avx_vnni ? " avx-vnni " : " ") + format +
                                    (o.kv_cache_dtype == "f32" ? "" : ", KV " + o.kv_cache_dtype);
    progress("weights " + format + ": " + std::to_string(model->weight_bytes() >> 20) + " MiB");
    for (int threads : o.threads) {
      ThreadPool pool(threads);
      const size_t first_row = rows.size();
      BenchRow base;
      base.quant = format;
      base.kernel_path = kernel_path;
      base.threads = threads;
      base.load_s = load_s;
      base.rss_anon_settled_bytes = settled;
      base.rss_anon_peak_bytes = peak.load();
      base.commit = spark_git_commit();
      KvPagePool kv_pool(cfg, 16, 0, false, parse_kv_cache_dtype(o.kv_cache_dtype));
      std::vector<float> logits;
      if (o.n_prompt > 0) {
        BenchRow row = base;
        row.test = "pp" + std::to_string(o.n_prompt);
        row.n_prompt = o.n_prompt;
        const auto tokens = random_tokens(o.n_prompt, cfg.vocab_size, rng);
        int64_t kv_bytes = 0;
        auto rates = repeat(o.reps, row.test + " t=" + std::to_string(threads), [&] {
          SequenceKv kv(kv_pool);
          kv.reserve(o.n_prompt);
          SequenceChunk chunk{&kv, tokens.data(), o.n_prompt, LogitsMode::kLast};
          const auto t = Clock::now();
          model->forward(std::span<const SequenceChunk>(&chunk, 1), logits, pool);
          kv_bytes = kv.pages_held() * kv_pool.page_bytes();
          return o.n_prompt / seconds_since(t);
        });
        const Stats s = summarize(rates);
        row.tokens_per_s_median = s.median;
        row.tokens_per_s_min = s.min;
        row.tokens_per_s_max = s.max;
        row.kv_bytes = kv_bytes;
        rows.push_back(row);
      }
      if (o.n_gen > 0) {
        BenchRow row = base;
        row.test = "tg" + std::to_string(o.n_gen);
        row.n_gen = o.n_gen;
        const auto tokens = random_tokens(o.n_gen, cfg.vocab_size, rng);
        int64_t kv_bytes = 0, deep_kv_bytes = 0;
        auto decode = [&](SequenceKv& kv) {
          const auto t = Clock::now();
          for (int i = 0; i < o.n_gen; ++i) {
            SequenceChunk chunk{&kv, tokens.data() + i, 1, LogitsMode::kLast};
            model->forward(std::span<const SequenceChunk>(&chunk, 1), logits, pool);
          }
          return o.n_gen / seconds_since(t);
        };
        // With a depth, one sequence is prefilled (untimed, in the engine's 512-token chunks) and each
        // repetition decodes n_gen tokens on a fresh sequence and then n_gen more on the deep one, back to
        // back, so the two rates see the same machine load (the deep context grows by n_gen per repetition,
        // a few percent of the depth).
        // Decode runs on a bounded pool as the engine's (one arena, huge pages where available). On pages
        // allocated one by one (4 KiB pages), storing each token's K and V in the sliding rings took 0.24 ms
        // of a 16 ms W4A8 step against 0.01 ms in the arena, and --profile's KV store + attention section
        // was 0.07-0.23 ms longer in each of 4 alternated rounds (bench/RESULTS.md, session 42).
        // Pages of 16 positions: the deep sequence (depth + (reps + 1) x n_gen) and a fresh one, each
        // with its rings.
        const int64_t tg_pages = (o.depth + static_cast<int64_t>(o.reps + 1) * o.n_gen + 15) / 16 +
                                 (o.n_gen + 15) / 16 + 2 * kv_pool.ring_pages();
        KvPagePool tg_pool(cfg, 16, tg_pages * kv_pool.page_bytes(), false, kv_pool.dtype());
        SequenceKv deep(tg_pool);
        if (o.depth > 0) {
          const auto prompt = random_tokens(o.depth, cfg.vocab_size, rng);
          if (!deep.reserve(o.depth + static_cast<int64_t>(o.reps + 1) * o.n_gen)) {
            throw Error("KV reserve failed");
          }
          const auto t = Clock::now();
          for (int64_t p = 0; p < o.depth; p += 512) {
            SequenceChunk chunk{&deep, prompt.data() + p, std::min<int64_t>(512, o.depth - p),
                                LogitsMode::kNone};
            model->forward(std::span<const SequenceChunk>(&chunk, 1), logits, pool);
          }
          progress("depth " + std::to_string(o.depth) + " prefilled in " + std::to_string(seconds_since(t)) +
                   " s");
        }
        std::vector<double> deep_rates;
        // --profile: the timed repetitions' steps, the fresh sequence's and the deep one's apart.
        std::optional<bench::StepProfile> fresh_profile, deep_profile;
        if (o.profile) {
          fresh_profile.emplace(*model);
          deep_profile.emplace(*model);
        }
        // The taps point into the profiles: removed before those die, an exception included.
        struct TapRemover {
          SparkModel& model;
          ~TapRemover() { model.set_activation_tap(nullptr); }
        } tap_remover{*model};
        int rep_index = 0;
        auto rates = repeat(o.reps, row.test + " t=" + std::to_string(threads), [&] {
          if (rep_index++ == 1 && o.profile) {  // the warm-up is done
            fresh_profile->reset();
            deep_profile->reset();
          }
          SequenceKv kv(tg_pool);
          if (!kv.reserve(o.n_gen)) throw Error("KV reserve failed");
          if (o.profile) {
            model->set_activation_tap(fresh_profile->tap());
            fresh_profile->restart_clock();
          }
          const double rate = decode(kv);
          kv_bytes = kv.pages_held() * tg_pool.page_bytes();
          if (o.depth > 0) {
            if (o.profile) {
              model->set_activation_tap(deep_profile->tap());
              deep_profile->restart_clock();
            }
            deep_rates.push_back(decode(deep));
            deep_kv_bytes = deep.pages_held() * tg_pool.page_bytes();
            progress("  tg" + std::to_string(o.n_gen) + " @ d" + std::to_string(o.depth) + ": " +
                     std::to_string(deep_rates.back()) + " t/s");
          }
          model->set_activation_tap(nullptr);
          return rate;
        });
        if (o.profile) {
          const std::string what = "decode step profile: " + row.test + ", " + kernel_path + ", " +
                                   std::to_string(threads) + " threads";
          profile_tables.push_back(fresh_profile->table(what));
          if (o.depth > 0)
            profile_tables.push_back(deep_profile->table(what + " @ d" + std::to_string(o.depth)));
        }
        const Stats s = summarize(rates);
        row.tokens_per_s_median = s.median;
        row.tokens_per_s_min = s.min;
        row.tokens_per_s_max = s.max;
        row.kv_bytes = kv_bytes;
        rows.push_back(row);
        if (o.depth > 0) {
          deep_rates.erase(deep_rates.begin());  // the warm-up's
          const Stats d = summarize(deep_rates);
          row.test += " @ d" + std::to_string(o.depth);
          row.tokens_per_s_median = d.median;
          row.tokens_per_s_min = d.min;
          row.tokens_per_s_max = d.max;
          row.kv_bytes = deep_kv_bytes;
          rows.push_back(row);
        }
      }
      // With --json-schema the free (mode 0) and the constrained run (mode 1) alternate within each
      // repetition, on the same prompts, so a change of load on a shared machine hits both alike; with
      // --vs-greedy, greedy (mode 0) and the given sampling (mode 1) do. Odd repetitions run mode 1 first, so
      // a drift within a repetition does not favour one mode.
      const int modes = schema_grammar || o.vs_greedy ? 2 : 1;
      const BenchSampling greedy;
      const BenchSampling& mode0_sampling = o.vs_greedy ? greedy : o.sampling;
      const BenchSampling* const mode_sampling[2] = {&mode0_sampling, &o.sampling};
      const std::string label = sampling_label(o.sampling);
      const std::string mode_label[2] = {
          o.vs_greedy ? " greedy" : label,
          schema_grammar ? label + " json-schema" : (label.empty() ? " greedy again" : label)};
      std::map<int32_t, float> logit_bias[2];
      for (int m = 0; m < modes; ++m) {
        std::mt19937 bias_rng(static_cast<uint32_t>(o.seed) + 7);
        std::uniform_int_distribution<int32_t> id(0, cfg.vocab_size - 1);
        while (static_cast<int>(logit_bias[m].size()) < mode_sampling[m]->logit_bias_ids)
          logit_bias[m][id(bias_rng)] = 1.0f;
      }
      for (int n : o.concurrency) {
        // Exactly the KV the run needs: n sequences' rings and blocks.
        EngineOptions eo;
        eo.threads = threads;
        eo.max_num_seqs = std::max(64, n);
        eo.max_queued_requests = std::max(256, n);
        eo.enable_prefix_caching = false;  // random prompts: the cache would only cost ring copies
        const int64_t seq_pages = kv_pool.ring_pages() + (o.conc_prompt + o.conc_gen + 15) / 16 + 1;
        eo.kv_cache_memory_bytes = n * seq_pages * kv_pool.page_bytes();
        eo.kv_cache_dtype = o.kv_cache_dtype;
        // --profile: where the engine's steps spend their wall time over the timed repetitions of mode 0,
        // prefill chunks and decode steps together. The engine thread runs every forward; the tap is set
        // and removed between runs, while no request is in flight. Declared before the engine, so that on
        // an error the engine's thread is joined (~Engine) before the tap is removed and the profile dies.
        std::optional<bench::StepProfile> conc_profile;
        if (o.profile) conc_profile.emplace(*model);
        struct TapRemover {
          SparkModel& model;
          ~TapRemover() { model.set_activation_tap(nullptr); }
        } tap_remover{*model};
        Engine engine(model, eo);
        const std::string name = "conc" + std::to_string(n);
        // One run: its tokens/s, tokens per sequence and the sampling phase's share of the steps' wall time.
        auto once = [&](std::vector<std::vector<int32_t>> prompts, int m, double& per_seq, double& sampling) {
          const BenchSampling& sp = *mode_sampling[m];
          const bool constrained = schema_grammar && m == 1;
          std::vector<std::shared_ptr<RequestHandle>> handles;
          const EngineStats before = engine.stats();
          const auto t = Clock::now();
          for (int i = 0; i < n; ++i) {
            GenerationRequest req;
            req.prompt = std::move(prompts[static_cast<size_t>(i)]);
            req.params = sp.params;
            req.params.logit_bias = logit_bias[m];
            req.params.seed = static_cast<uint64_t>(i) + 1;
            req.params.max_tokens = o.conc_gen;
            // Constrained: the grammar ends the sequence (the end token is allowed once it can end), as
            // the server does.
            req.params.ignore_eos = !constrained;
            if (constrained) req.processor = make_grammar_logits_processor(schema_grammar, eos, o.conc_gen);
            handles.push_back(engine.submit(std::move(req)));
          }
          int64_t generated = 0;
          std::vector<std::vector<int32_t>> outputs;
          for (auto& h : handles) {
            std::vector<TokenEvent> ev;
            while (!h->wait(ev, std::chrono::milliseconds(100))) {
            }
            if (h->reason() == FinishReason::kError) throw Error("generation failed: " + h->error());
            generated += static_cast<int64_t>(ev.size());
            std::vector<int32_t> ids;
            for (const auto& e : ev) {
              if (e.token != eos) ids.push_back(e.token);
            }
            outputs.push_back(std::move(ids));
          }
          const double rate = static_cast<double>(generated) / seconds_since(t);
          per_seq = static_cast<double>(generated) / n;
          const EngineStats after = engine.stats();
          sampling = static_cast<double>(after.sampling_ns - before.sampling_ns) /
                     static_cast<double>(std::max<int64_t>(1, after.step_ns - before.step_ns));
          if (constrained) check_schema_outputs(outputs, n, threads);
          return rate;
        };
        std::vector<double> rates[2], per_seq[2], sampling[2];
        for (int r = 0; r <= o.reps; ++r) {
          std::vector<std::vector<int32_t>> prompts;
          for (int i = 0; i < n; ++i) prompts.push_back(random_tokens(o.conc_prompt, cfg.vocab_size, rng));
          for (int k = 0; k < modes; ++k) {
            const int m = r % 2 == 1 ? modes - 1 - k : k;
            double tokens = 0, share = 0;
            const bool profiled = conc_profile && r > 0 && m == 0;
            if (profiled) {
              model->set_activation_tap(conc_profile->tap());
              conc_profile->restart_clock();
            }
            const double rate = once(prompts, m, tokens, share);
            if (profiled) model->set_activation_tap(nullptr);
            progress(name + mode_label[m] + " t=" + std::to_string(threads) +
                     (r == 0 ? " warm-up" : " rep " + std::to_string(r) + "/" + std::to_string(o.reps)) +
                     ": " + std::to_string(rate) + " t/s");
            if (r == 0) continue;
            rates[m].push_back(rate);
            per_seq[m].push_back(tokens);
            sampling[m].push_back(share);
          }
        }
        if (conc_profile) {
          profile_tables.push_back(
              conc_profile->table("engine step profile: " + name + mode_label[0] + ", " + kernel_path + ", " +
                                  std::to_string(threads) + " threads, " + std::to_string(o.conc_prompt) +
                                  "-token prompts and " + std::to_string(o.conc_gen) +
                                  " new tokens a sequence (prefill chunks and decode steps together)"));
        }
        for (int m = 0; m < modes; ++m) {
          BenchRow row = base;
          row.test = name + mode_label[m];
          row.n_prompt = o.conc_prompt;
          row.n_gen = o.conc_gen;
          row.concurrency = n;
          const Stats s = summarize(rates[m]);
          row.tokens_per_s_median = s.median;
          row.tokens_per_s_min = s.min;
          row.tokens_per_s_max = s.max;
          row.kv_bytes = engine.stats().kv_bytes_allocated;
          rows.push_back(row);
        }
        if (modes == 2) {
          // Mode 1 over mode 0: the median of the per-repetition ratios (each pair ran back to back on the
          // same prompts) with their range, beside both medians.
          std::vector<double> ratios;
          for (size_t i = 0; i < rates[0].size(); ++i) ratios.push_back(rates[1][i] / rates[0][i]);
          const Stats q = summarize(ratios);
          std::string line = name + " t=" + std::to_string(threads) + ":" +
                             (schema_grammar ? std::string(" json-schema") : mode_label[1]) + " " +
                             fixed(summarize(rates[1]).median, 2) + " t/s vs " +
                             (schema_grammar ? "free" : "greedy") + " " +
                             fixed(summarize(rates[0]).median, 2) + " t/s = " + fixed(100.0 * q.median, 1) +
                             "% [" + fixed(100.0 * q.min, 1) + "-" + fixed(100.0 * q.max, 1) +
                             "%] (median [min-max] of " + std::to_string(o.reps) + " paired repetitions";
          if (o.vs_greedy) {
            // Where a difference would come from, less exposed to the machine's load than tokens/s: the
            // sampling phase's share of the steps' wall time, per mode.
            line += "; sampling " + fixed(100.0 * summarize(sampling[1]).median, 2) + "% of step time vs " +
                    fixed(100.0 * summarize(sampling[0]).median, 2) + "%";
          }
          if (schema_grammar) {
            line += "; " + fixed(summarize(per_seq[1]).median, 1) + " tokens per constrained sequence, " +
                    std::to_string(valid_outputs) + "/" + std::to_string(checked_outputs) + " texts valid";
            valid_outputs = checked_outputs = 0;
          }
          comparison_lines.push_back(line + ")");
        }
      }
      if (o.shared_prefix > 0) {
        // One repetition of the model-level runs, then one of each engine run, and again: the engine's next
        // new session is compared with (a) of the same repetition, seconds apart rather than phases apart.
        OwnTokensRow own;
        own.threads = threads;
        std::vector<SharedPrefixRow> shared(o.sessions.size());
        for (size_t i = 0; i < shared.size(); ++i) {
          shared[i].quant = kernels::weight_format_name(model->weight_format());
          shared[i].threads = threads;
          shared[i].sessions = o.sessions[i];
        }
        for (int r = 0; r < o.reps; ++r) {
          run_own_tokens(o, model, pool, 1, own, rng);
          for (auto& row : shared) run_shared_prefix(o, model, 1, row, rng);
          own.engine_over_in_place.push_back(shared[0].warm_s.back() / own.in_place_s.back());
        }
        own_rows.push_back(std::move(own));
        shared_rows.insert(shared_rows.end(), shared.begin(), shared.end());
      }
      if (!ceilings.empty()) {
        const kernels::Roofline after = kernels::measure_roofline(pool);
        progress("ceilings at " + std::to_string(threads) + " threads after " + format + ": read " +
                 std::to_string(after.read_gbps) + " GB/s");
        const kernels::Roofline best = kernels::higher_of(ceilings.at(threads), after);
        for (size_t i = first_row; i < rows.size(); ++i)
          set_ceiling(rows[i], best, *model, mo.bf16_activations, flop_per_token);
        ceilings[threads] = after;
      }
    }
  }

  if (o.output == "json") {
    std::fputs(format_json(rows).c_str(), stdout);
  } else if (o.output == "csv") {
    std::fputs(format_csv(rows).c_str(), stdout);
  } else {
    if (!rows.empty()) std::fputs(format_markdown(rows, desc).c_str(), stdout);
    if (!shared_rows.empty()) std::fputs(format_shared_prefix(shared_rows, o, desc).c_str(), stdout);
    if (!own_rows.empty()) std::fputs(format_own_tokens(own_rows, shared_rows, o).c_str(), stdout);
  }
  // Constrained vs free, or sampling vs greedy: on stderr with json/csv output, so stdout stays one document.
  for (const auto& line : comparison_lines)
    std::fprintf(o.output == "md" ? stdout : stderr, "%s\n", line.c_str());
  for (const auto& table : profile_tables) std::fputs(table.c_str(), o.output == "md" ? stdout : stderr);
  if (texts_out.is_open() && !texts_out) throw Error(o.schema_texts + ": cannot write");
  if (invalid_total > 0)
    throw Error(std::to_string(invalid_total) + " constrained texts are not valid for the schema");
  if (!o.plot.empty()) {
    std::ofstream svg(o.plot);
    svg << plot_svg(rows, "spark-bench: " + desc);
    if (!svg) throw Error(o.plot + ": cannot write");
  }
  return 0;
}

}  // namespace

}  // namespace spark

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("spark-bench"));
  spdlog::set_level(spdlog::level::warn);
  spark::BenchOptions o;
  CLI::App app{"spark-bench: prefill, decode and concurrency throughput of spark-server's engine"};
  std::string threads = std::to_string(spark::ThreadPool::default_threads());
  std::string conc;
  std::string quants = "none";
  app.add_option("-m,--model", o.model_dir, "Checkpoint folder");
  app.add_option(
      "--random-weights", o.random_weights,
      "A config.json (or built-in name: spark-x2.5-1.7b, spark-x2.5-4b, tiny, demo) with random weights");
  app.add_option(
      "--quant", quants,
      "Comma list of weight formats: none (as stored), auto, f32, bf16, f16, int8, w4a8, w4a16, and "
      "bf16act (bf16 weights with --bf16-activations)");
  app.add_option("-t,--threads", threads, "Comma list of thread counts")->capture_default_str();
  app.add_option("-p,--n-prompt", o.n_prompt, "Prefill tokens (0: skip)")->capture_default_str();
  app.add_option("-n,--n-gen", o.n_gen, "Decode tokens (0: skip)")->capture_default_str();
  app.add_option(
         "-d,--depth", o.depth,
         "Also time tgN after this many prompt tokens already in the KV cache, each repetition beside a "
         "short-context tgN")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype, "K/V element type: f32, bf16 or fp8 (FP8 E4M3)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  app.add_option("-r,--reps", o.reps, "Timed repetitions (one warm-up is added)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--concurrency", conc, "Comma list of concurrent sequence counts (e.g. 1,2,4,8,16,32,64)");
  app.add_option("--conc-prompt", o.conc_prompt, "Prompt tokens per concurrent sequence")
      ->capture_default_str();
  app.add_option("--conc-gen", o.conc_gen, "Generated tokens per concurrent sequence")->capture_default_str();
  app.add_option("--temperature", o.sampling.params.temperature,
                 "Sampling temperature of the --concurrency runs (0: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 100.0f));
  app.add_option("--top-p", o.sampling.params.top_p, "top_p of the --concurrency runs")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--top-k", o.sampling.params.top_k, "top_k of the --concurrency runs (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--min-p", o.sampling.params.min_p, "min_p of the --concurrency runs")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--presence-penalty", o.sampling.params.presence_penalty,
                 "presence_penalty of the --concurrency runs")
      ->capture_default_str()
      ->check(CLI::Range(-2.0f, 2.0f));
  app.add_option("--frequency-penalty", o.sampling.params.frequency_penalty,
                 "frequency_penalty of the --concurrency runs")
      ->capture_default_str()
      ->check(CLI::Range(-2.0f, 2.0f));
  app.add_option("--repetition-penalty", o.sampling.params.repetition_penalty,
                 "repetition_penalty of the --concurrency runs")
      ->capture_default_str()
      ->check(CLI::Range(0.01f, 10.0f));
  app.add_option("--logprobs", o.sampling.params.logprobs,
                 "logprobs of the --concurrency runs: top k alternatives (-1: none)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 20));
  app.add_option("--logit-bias", o.sampling.logit_bias_ids,
                 "logit_bias of the --concurrency runs: this many random token ids biased by +1 (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 300));
  app.add_flag(
      "--vs-greedy", o.vs_greedy,
      "Run each --concurrency count greedy and with the given sampling, alternating within each "
      "repetition on the same prompts, and print sampling / greedy tokens/s (per-repetition ratios)");
  app.add_option("--json-schema", o.json_schema,
                 "A JSON Schema file: run each --concurrency count again with every sequence held to it "
                 "(the server's grammar path) and print constrained vs free tokens/s");
  app.add_option("--tokenizer", o.tokenizer_dir,
                 "Folder with tokenizer.json for --json-schema (default: -m)");
  app.add_option("--schema-texts", o.schema_texts,
                 "Write the --json-schema runs' texts as JSON lines {concurrency, threads, text, valid}");
  app.add_option("-o,--output", o.output, "md, json or csv")->check(CLI::IsMember({"md", "json", "csv"}));
  app.add_option("--plot", o.plot, "Write an SVG of tokens/s vs concurrency (or threads)");
  app.add_option("--seed", o.seed, "Seed of the random weights and tokens");
  app.add_flag("--profile", o.profile,
               "After each tgN row, where a decode step's wall time goes: each stage of the model (norms, "
               "projections, attention, ...) per step, over the timed repetitions (the stages are timed "
               "between the model's activation taps, 13 a layer); after each concurrency run, the same for "
               "the engine's steps");
  std::string sessions = "1";
  app.add_option(
         "--shared-prefix", o.shared_prefix,
         "New sessions sharing a prefix of this many tokens: TTFT of the first and later ones and prompt "
         "tokens computed (0: skip)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--sessions", sessions, "Comma list of session counts arriving together (--shared-prefix)")
      ->capture_default_str();
  app.add_option("--session-tokens", o.session_tokens, "Each session's own prompt tokens after the prefix")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag(
      "--roofline", o.roofline,
      "Measure read bandwidth and FMA / int8 peaks and print the decode and prefill ceilings per format");
  app.add_flag(
      "--of-ceiling", o.of_ceiling,
      "Measure the ceilings (as --roofline) at each thread count before the runs and after each format's, "
      "and print each pp / tg row's fraction of its format's ceiling (the higher of the last measurement at "
      "that thread count before the format's runs and the one after them)");
  CLI11_PARSE(app, argc, argv);
  try {
    auto split_ints = [](const std::string& s, const char* flag) {
      std::vector<int> v;
      std::stringstream ss(s);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        try {
          size_t used = 0;
          int x = std::stoi(item, &used);
          if (used != item.size() || x < 1) throw std::invalid_argument(item);
          v.push_back(x);
        } catch (const std::exception&) {
          throw spark::Error(std::string(flag) + ": '" + item + "' is not a positive integer");
        }
      }
      return v;
    };
    o.threads = split_ints(threads, "--threads");
    if (o.threads.empty()) throw spark::Error("--threads: give at least one thread count");
    o.concurrency = split_ints(conc, "--concurrency");
    o.sessions = split_ints(sessions, "--sessions");
    if (o.vs_greedy && !o.json_schema.empty()) throw spark::Error("--vs-greedy and --json-schema: give one");
    if (o.vs_greedy && o.concurrency.empty()) throw spark::Error("--vs-greedy needs --concurrency");
    if (o.shared_prefix > 0 && o.sessions.empty()) throw spark::Error("--sessions: give at least one count");
    o.quants.clear();
    std::stringstream ss(quants);
    std::string q;
    while (std::getline(ss, q, ',')) {
      if (!q.empty()) o.quants.push_back(q);
    }
    return spark::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
