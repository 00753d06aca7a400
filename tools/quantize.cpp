// spark-quantize: writes a pre-quantized checkpoint (packed int8 / w4a8 / w4a16 tensors that load by
// mmap with no repacking), or with --report prints how far each format is from f32: weight SNR per
// tensor, logits SNR, top-1 agreement and greedy agreement on a prompt longer than the sliding window.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "model/checkpoint.h"
#include "model/quantization_report.h"
#include "model/quantized_checkpoint.h"
#include "model/spark_model.h"
#include "spark/error.h"
#include "util/thread_pool.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string db(double v) {
  if (std::isinf(v)) return "exact";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Token ids drawn uniformly from the vocabulary past the first 16 (special and control tokens), fixed
// by the seed so every format sees the same prompt.
std::vector<int32_t> probe_prompt(const spark::ModelConfig& c, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(std::min(16, c.vocab_size - 1), c.vocab_size - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = dist(rng);
  return t;
}

spark::ModelOptions options_for(const std::string& format, const std::string& priority,
                                int64_t max_model_len) {
  spark::ModelOptions o;
  o.max_model_len = max_model_len;
  spark::parse_quant_option(format, priority, o);
  return o;
}

int write_command(const std::string& model_dir, const std::string& out, const std::string& format,
                  const std::string& priority, uint64_t shard_bytes, bool verify, spark::ThreadPool& pool) {
  auto t0 = Clock::now();
  auto ck = std::make_shared<const spark::Checkpoint>(model_dir);
  spark::check_quantized_output(out, model_dir);
  if (!ck->config().quant_format.empty()) {
    throw spark::Error(model_dir + ": already pre-quantized (" + ck->config().quant_format +
                       "); quantize the float checkpoint it came from");
  }
  const spark::ModelOptions o = options_for(format, priority, 256);
  if (o.quant == spark::QuantChoice::kAsStored ||
      (o.quant == spark::QuantChoice::kExplicit && spark::kernels::is_float_format(o.format))) {
    throw spark::Error("spark-quantize writes int8, w4a8, w4a16 or auto, not " + format +
                       " (a float checkpoint needs no packing)");
  }
  spark::SparkModel model(ck, o, pool);
  std::fprintf(stderr, "spark-quantize: %s -> %s in %.1f s (%.1f MiB of linear weights)\n", model_dir.c_str(),
               spark::kernels::weight_format_name(model.weight_format()), seconds_since(t0),
               static_cast<double>(model.weight_bytes()) / (1 << 20));
  auto t1 = Clock::now();
  const spark::QuantizedCheckpointSummary s = spark::write_quantized_checkpoint(model, out, shard_bytes);
  std::printf("wrote %s: %s, %zu file(s), %.1f MiB of tensors, in %.1f s\n", out.c_str(),
              spark::kernels::weight_format_name(model.weight_format()), s.files.size(),
              static_cast<double>(s.tensor_bytes) / (1 << 20), seconds_since(t1));
  if (!verify) return 0;

  // Load what was written the way the server does and check it computes exactly what quantize-at-load
  // computes: same packed bytes, so bit-identical logits.
  auto t2 = Clock::now();
  spark::SparkModel loaded(std::make_shared<const spark::Checkpoint>(out), spark::ModelOptions{256}, pool);
  const double load_s = seconds_since(t2);
  const std::vector<int32_t> prompt = probe_prompt(model.config(), 24, 7);
  const spark::ModelProbe a = spark::probe_model(model, prompt, 4, pool);
  const spark::ModelProbe b = spark::probe_model(loaded, prompt, 4, pool);
  if (a.logits != b.logits || a.greedy != b.greedy) {
    throw spark::Error(out + ": the written checkpoint does not reproduce quantize-at-load logits");
  }
  std::printf(
      "verified: loads in %.3f s (mapped, no repacking) and gives logits identical to quantize-at-load "
      "on %zu positions\n",
      load_s, prompt.size());
  return 0;
}

int report_command(const std::string& model_dir, const std::string& formats, int64_t prompt_tokens,
                   int64_t greedy_steps, uint64_t seed, spark::ThreadPool& pool) {
  auto ck = std::make_shared<const spark::Checkpoint>(model_dir);
  const spark::ModelConfig& c = ck->config();
  if (prompt_tokens <= 0) prompt_tokens = static_cast<int64_t>(c.sliding_window) + 64;
  const int64_t max_len = prompt_tokens + greedy_steps;
  const std::vector<int32_t> prompt = probe_prompt(c, prompt_tokens, seed);

  std::fprintf(stderr, "spark-quantize: f32 reference over %lld prompt tokens + %lld greedy\n",
               static_cast<long long>(prompt_tokens), static_cast<long long>(greedy_steps));
  spark::ModelProbe reference;
  {
    spark::SparkModel f32(ck, options_for("f32", "speed", max_len), pool);
    reference = spark::probe_model(f32, prompt, greedy_steps, pool);
  }

  struct Row {
    std::string format;
    double bits = 0, mib = 0;
    std::vector<spark::WeightFidelity> weights;
    spark::LogitsFidelity logits;
  };
  std::vector<Row> rows;
  for (const std::string& name : split_list(formats)) {
    std::fprintf(stderr, "spark-quantize: %s\n", name.c_str());
    spark::SparkModel m(ck, options_for(name, "speed", max_len), pool);
    Row r;
    r.format = spark::kernels::weight_format_name(m.weight_format());
    r.weights = spark::weight_fidelity(m, pool);
    double weights = 0, bits = 0;
    for (const auto& w : r.weights) {
      weights += static_cast<double>(w.n) * static_cast<double>(w.k);
      bits += w.bits_per_weight * static_cast<double>(w.n) * static_cast<double>(w.k);
    }
    r.bits = bits / weights;
    r.mib = static_cast<double>(m.weight_bytes()) / (1 << 20);
    r.logits =
        spark::compare_probes(reference, spark::probe_model(m, prompt, greedy_steps, pool), c.vocab_size);
    rows.push_back(std::move(r));
  }

  std::printf("## Fidelity against f32, checkpoint %s\n\n", model_dir.c_str());
  std::printf("Prompt: %lld seeded random tokens (sliding window %d), then %lld greedy tokens.\n\n",
              static_cast<long long>(prompt_tokens), c.sliding_window, static_cast<long long>(greedy_steps));
  std::printf(
      "| format | bits/weight | linear MiB | weight SNR dB min | weight SNR dB median | logits SNR dB | "
      "top-1 agreement | greedy identical |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::vector<double> snr;
    for (const auto& w : r.weights) snr.push_back(w.snr_db);
    std::sort(snr.begin(), snr.end());
    std::printf(
        "| %s | %.2f | %.1f | %s | %s | %s | %lld/%lld (%.1f%%) | %lld/%lld |\n", r.format.c_str(), r.bits,
        r.mib, db(snr.front()).c_str(), db(snr[snr.size() / 2]).c_str(), db(r.logits.snr_db).c_str(),
        static_cast<long long>(r.logits.top1_agree), static_cast<long long>(r.logits.positions),
        100.0 * static_cast<double>(r.logits.top1_agree) / static_cast<double>(r.logits.positions),
        static_cast<long long>(r.logits.greedy_identical), static_cast<long long>(r.logits.greedy_steps));
  }
  std::printf("\n## Weight SNR (dB) per tensor\n\n| tensor | shape |");
  for (const Row& r : rows) std::printf(" %s |", r.format.c_str());
  std::printf("\n|---|---|");
  for (size_t i = 0; i < rows.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (size_t t = 0; !rows.empty() && t < rows[0].weights.size(); ++t) {
    const auto& w = rows[0].weights[t];
    std::printf("| %s | %lldx%lld |", w.name.c_str(), static_cast<long long>(w.n),
                static_cast<long long>(w.k));
    for (const Row& r : rows) std::printf(" %s |", db(r.weights[t].snr_db).c_str());
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "spark-quantize: write a pre-quantized Spark checkpoint, or report each format's fidelity against f32"};
  std::string model_dir, out, format, priority = "speed";
  std::string report_formats = "bf16,int8,w4a8,w4a16";
  bool report = false, no_verify = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double shard_gib = 4;
  int64_t prompt_tokens = 0, greedy_steps = 32;
  uint64_t seed = 1;
  app.add_option("-m,--model", model_dir, "Float checkpoint folder (bf16, f16 or f32 safetensors)")
      ->required();
  app.add_option("-o,--out", out,
                 "Output folder for the pre-quantized checkpoint (must not exist or be empty)");
  app.add_option("-f,--format", format,
                 "int8, w4a8, w4a16 or auto (the hardware probe's choice); with --report, a comma list "
                 "(default bf16,int8,w4a8,w4a16)");
  app.add_option("--priority", priority, "With --format auto: speed or fidelity")
      ->check(CLI::IsMember({"speed", "fidelity"}));
  app.add_option("-t,--threads", threads, "Threads")->check(CLI::Range(1, 1024));
  app.add_option("--max-shard-gib", shard_gib, "Largest safetensors file to write, in GiB")
      ->check(CLI::Range(0.001, 1024.0));
  app.add_flag("--no-verify", no_verify, "Skip reloading the output and comparing its logits");
  app.add_flag("--report", report,
               "Print weight SNR per tensor, logits SNR and greedy agreement against f32");
  app.add_option("--prompt-tokens", prompt_tokens, "Report prompt length (default: sliding window + 64)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--greedy-tokens", greedy_steps, "Report greedy continuation length")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--seed", seed, "Report prompt seed");
  CLI11_PARSE(app, argc, argv);
  try {
    spark::ThreadPool pool(threads);
    if (report) {
      if (!out.empty()) throw spark::Error("--report prints a table; it does not take --out");
      return report_command(model_dir, format.empty() ? report_formats : format, prompt_tokens, greedy_steps,
                            seed, pool);
    }
    if (out.empty() || format.empty()) throw spark::Error("writing a checkpoint needs --out and --format");
    return write_command(model_dir, out, format, priority, static_cast<uint64_t>(shard_gib * (1 << 30)),
                         !no_verify, pool);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
