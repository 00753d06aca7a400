#include "cli/generate_command.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cpu/cpu_features.h"
#include "engine/prefix_cache.h"
#include "model/model_source.h"
#include "model/spark_model.h"
#include "spark/error.h"
#include "util/npy.h"

namespace spark {

namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string prompt_ids;
  int max_tokens = 32;
  int top = 5;
  int64_t prefill_chunk = 0;  // 0: the whole prompt in one chunk
  int64_t resume_at = 0;      // > 0: positions [0, resume_at) come through the prefix cache
  int64_t max_model_len = 0;
  int threads = 0;
  bool stop_at_eos = false;
  bool json = false;
  std::string logits_out;
  std::string dump_dir;
  std::string quant = "none";
  std::string priority = "speed";
  std::string kv_cache_dtype = "f32";
  bool bf16_activations = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw Error("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw Error("--prompt-ids: no token ids given");
  return ids;
}

std::vector<std::pair<int32_t, float>> top_k(const float* logits, int vocab, int k) {
  std::vector<int32_t> idx(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) idx[i] = i;
  k = std::min(k, vocab);
  // Ties go to the lower id, as numpy's argmax does, so greedy choices are comparable across engines.
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<std::pair<int32_t, float>> out;
  for (int i = 0; i < k; ++i) out.emplace_back(idx[i], logits[idx[i]]);
  return out;
}

int run_generate(const GenerateOptions& o) {
  // The kernel tier first: a wrong SPARK_FORCE_ISA or SPARK_DISABLE_CPU_FEATURES ends the run before the
  // checkpoint is read or quantized (as the server's start does).
  const char* isa = kernels::isa_name(kernels::active_isa());
  const auto dir = resolve_model_dir(o.model_dir);
  const auto t0 = std::chrono::steady_clock::now();
  auto checkpoint = std::make_shared<const Checkpoint>(dir);
  const ModelConfig& cfg = checkpoint->config();
  const int64_t max_len = resolve_max_model_len(o.max_model_len, cfg.max_position_embeddings);
  ThreadPool pool(o.threads > 0 ? o.threads : ThreadPool::default_threads());
  ModelOptions mo;
  mo.max_model_len = max_len;
  parse_quant_option(o.quant, o.priority, mo);
  mo.bf16_activations = o.bf16_activations;
  SparkModel model(checkpoint, mo, pool);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info(
      "loaded {} ({} layers, hidden {}, vocab {}) in {:.2f} s; max_model_len {}, {} threads, kernels {}",
      dir.string(), cfg.num_layers, cfg.hidden_size, cfg.vocab_size, load_s, max_len, pool.size(), isa);

  const std::vector<int32_t> prompt = parse_ids(o.prompt_ids);
  if (static_cast<int64_t>(prompt.size()) + o.max_tokens > max_len) {
    throw Error("prompt of " + std::to_string(prompt.size()) + " tokens + " + std::to_string(o.max_tokens) +
                " new tokens exceeds max_model_len " + std::to_string(max_len));
  }

  KvPagePool kv_pool(cfg, 16, 0, false, parse_kv_cache_dtype(o.kv_cache_dtype));
  PrefixCache cache(kv_pool);
  auto kv = std::make_unique<SequenceKv>(kv_pool);
  const int64_t bs = kv_pool.block_size();
  if (o.resume_at < 0 || o.resume_at % bs != 0 || o.resume_at >= static_cast<int64_t>(prompt.size())) {
    throw Error("--resume-at must be a multiple of " + std::to_string(bs) + " below the prompt length");
  }
  std::vector<float> all_logits;  // [rows, vocab]: every prompt position, then every decode step
  std::vector<float> step_logits;
  int step = 0;
  if (!o.dump_dir.empty()) {
    std::filesystem::create_directories(o.dump_dir);
    model.set_activation_tap([&](const std::string& name, int layer, const float* data, int64_t rows,
                                 int64_t cols) {
      std::string file =
          name + (layer >= 0 ? ".L" + std::to_string(layer) : "") + ".step" + std::to_string(step) + ".npy";
      write_npy_f32(std::filesystem::path(o.dump_dir) / file, data, {rows, cols});
    });
  }
  auto run_chunk = [&](const int32_t* tokens, int64_t n) {
    if (!kv->reserve(kv->num_tokens() + n)) throw Error("KV cache exhausted");
    // Before the resume point the sliding layers are captured per block, as the engine does.
    for (int64_t b = kv->num_tokens() / bs; b * bs < std::min(kv->num_tokens() + n, o.resume_at); ++b) {
      if (kv->capturing(b) || kv_pool.slide_pages_per_block() == 0) continue;
      std::vector<int> pages;
      for (int i = 0; i < kv_pool.slide_pages_per_block(); ++i) pages.push_back(kv_pool.allocate());
      kv->set_capture(b, std::move(pages));
    }
    SequenceChunk chunk{kv.get(), tokens, n, LogitsMode::kAll};
    model.forward(std::span<const SequenceChunk>(&chunk, 1), step_logits, pool);
    all_logits.insert(all_logits.end(), step_logits.begin(), step_logits.end());
    ++step;
  };

  const auto t_prefill = std::chrono::steady_clock::now();
  const int64_t chunk = o.prefill_chunk > 0 ? o.prefill_chunk : static_cast<int64_t>(prompt.size());
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  for (int64_t i = 0; i < o.resume_at; i += chunk)
    run_chunk(prompt.data() + i, std::min(chunk, o.resume_at - i));
  if (o.resume_at > 0) {
    // The engine's path for a new session: the blocks go into the prefix cache, the sequence that
    // computed them ends (the cache alone holds them), and a new sequence resumes from a lookup.
    uint64_t parent = PrefixCache::kRootHash;
    for (int64_t b = 0; b < o.resume_at / bs; ++b) {
      auto h = cache.insert(parent, std::span<const int32_t>(prompt.data() + b * bs, static_cast<size_t>(bs)),
                            kv->blocks()[static_cast<size_t>(b)], kv->take_capture(b));
      if (!h) throw Error("--resume-at: block " + std::to_string(b) + " was not cached");
      parent = *h;
    }
    kv = std::make_unique<SequenceKv>(kv_pool);
    PrefixCache::Match hit = cache.lookup(prompt, o.resume_at);
    if (hit.tokens != o.resume_at || !kv->adopt_prefix(hit.full_pages, hit.slide, &pool)) {
      throw Error("--resume-at: the prefix cache gave " + std::to_string(hit.tokens) + " of " +
                  std::to_string(o.resume_at) + " tokens");
    }
    spdlog::info("resumed at {} from the prefix cache ({} blocks)", o.resume_at, cache.blocks());
  }
  for (int64_t i = o.resume_at; i < n_prompt; i += chunk) {
    run_chunk(prompt.data() + i, std::min(chunk, n_prompt - i));
  }
  const double prefill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_prefill).count();

  const int vocab = cfg.vocab_size;
  nlohmann::json steps = nlohmann::json::array();
  std::vector<int32_t> generated;
  const auto t_decode = std::chrono::steady_clock::now();
  for (int i = 0; i < o.max_tokens; ++i) {
    const float* last = all_logits.data() + all_logits.size() - static_cast<size_t>(vocab);
    const auto top = top_k(last, vocab, std::max(1, o.top));
    const int32_t next = top[0].first;
    generated.push_back(next);
    nlohmann::json entry = {{"token", next}, {"top", nlohmann::json::array()}};
    std::string line = "step " + std::to_string(i) + ": token " + std::to_string(next) + "  top:";
    for (auto& [id, logit] : top) {
      entry["top"].push_back({id, logit});
      char buf[64];
      std::snprintf(buf, sizeof buf, " %d (%.4f)", id, logit);
      line += buf;
    }
    steps.push_back(entry);
    if (!o.json) std::printf("%s\n", line.c_str());
    if (o.stop_at_eos &&
        std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), next) != cfg.eos_token_ids.end())
      break;
    if (i + 1 < o.max_tokens) run_chunk(&generated.back(), 1);
  }
  const double decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_decode).count();

  if (!o.logits_out.empty()) {
    write_npy_f32(o.logits_out, all_logits.data(),
                  {static_cast<int64_t>(all_logits.size() / static_cast<size_t>(vocab)), vocab});
  }
  if (o.json) {
    nlohmann::json out = {{"prompt_ids", prompt},   {"generated_ids", generated}, {"steps", steps},
                          {"prefill_s", prefill_s}, {"decode_s", decode_s},       {"max_model_len", max_len}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("prefill %zu tokens: %.3f s; decode %zu tokens: %.3f s\n", prompt.size(), prefill_s,
                generated.size(), decode_s);
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<GenerateOptions>();
  CLI::App* cmd =
      app.add_subcommand("generate", "Greedy-decode from token ids, printing each step's top logits");
  cmd->add_option("--model", opts->model_dir, "Checkpoint folder (default: the built-in random-weight demo)");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "Comma-separated prompt token ids")->required();
  cmd->add_option("-n,--max-tokens", opts->max_tokens, "Tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--top", opts->top, "Top logits to print per step")->check(CLI::Range(1, 100));
  cmd->add_option("--prefill-chunk", opts->prefill_chunk,
                  "Prefill chunk size (0: whole prompt at once, 1: token "
                  "by token)");
  cmd->add_option("--max-model-len", opts->max_model_len,
                  "Context length (default: model limit, capped at 32768)");
  cmd->add_option("-t,--threads", opts->threads, "Compute threads (default: physical cores)");
  cmd->add_flag("--stop-at-eos", opts->stop_at_eos, "Stop when EOS is generated");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  cmd->add_option("--resume-at", opts->resume_at,
                  "Compute the first N prompt tokens (a multiple of 16), put their blocks in a prefix cache, "
                  "then resume a new sequence from it (tests the cache against the reference)");
  cmd->add_option("--logits-out", opts->logits_out, "Write every position's logits to this .npy file");
  cmd->add_option("--quant", opts->quant,
                  "Weight format: none (as stored), auto, f32, bf16, f16, int8, w4a8, w4a16");
  cmd->add_option("--priority", opts->priority, "For --quant auto: speed or fidelity");
  cmd->add_option("--kv-cache-dtype", opts->kv_cache_dtype, "K/V element type: f32, bf16 or fp8 (FP8 E4M3)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8", "fp8_e4m3"}));
  cmd->add_flag("--bf16-activations", opts->bf16_activations,
                "bf16 weights: round the linear layers' inputs to bf16 (AMX-BF16 / AVX512-BF16 prefill)");
  cmd->add_option("--dump-activations", opts->dump_dir, "Write every named intermediate to .npy files here");
  cmd->callback([opts, &exit_code] { exit_code = run_generate(*opts); });
}

}  // namespace spark
