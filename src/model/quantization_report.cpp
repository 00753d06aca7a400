#include "model/quantization_report.h"

#include <cmath>
#include <limits>

#include "model/kv_cache.h"
#include "spark/error.h"

namespace spark {

namespace {

double snr_from_energies(double signal, double noise) {
  if (noise == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

}  // namespace

double snr_db(const float* reference, const float* test, size_t n) {
  double signal = 0, noise = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = reference[i], d = r - static_cast<double>(test[i]);
    signal += r * r;
    noise += d * d;
  }
  return snr_from_energies(signal, noise);
}

std::vector<WeightFidelity> weight_fidelity(const SparkModel& model, ThreadPool& pool) {
  const Checkpoint& ck = model.checkpoint();
  if (!ck.config().quant_format.empty()) {
    throw Error(ck.dir().string() + ": pre-quantized; weight SNR needs the float checkpoint it came from");
  }
  std::vector<WeightFidelity> out;
  for (const auto& entry : model.linear_weights()) {
    // Named references, not a structured binding: clang before 16 cannot capture bindings in a lambda.
    const auto& prefix = entry.first;
    const auto& w = entry.second;
    const kernels::QuantizedWeight source = load_linear(ck, prefix);
    // Per-row sums in double, combined in order: the same figure for any pool size.
    std::vector<double> signal(static_cast<size_t>(w->n)), noise(static_cast<size_t>(w->n));
    pool.parallel_for(static_cast<size_t>(w->n), 64, [&](size_t begin, size_t end) {
      std::vector<float> a(static_cast<size_t>(w->k)), b(static_cast<size_t>(w->k));
      for (size_t r = begin; r < end; ++r) {
        kernels::dequantize_row(source, static_cast<int64_t>(r), a.data());
        kernels::dequantize_row(*w, static_cast<int64_t>(r), b.data());
        double s = 0, e = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          const double d = static_cast<double>(a[i]) - b[i];
          s += static_cast<double>(a[i]) * a[i];
          e += d * d;
        }
        signal[r] = s;
        noise[r] = e;
      }
    });
    double s = 0, e = 0;
    for (size_t r = 0; r < signal.size(); ++r) {
      s += signal[r];
      e += noise[r];
    }
    WeightFidelity f;
    f.name = prefix;
    f.n = w->n;
    f.k = w->k;
    f.bits_per_weight = kernels::bits_per_weight(w->format, w->n, w->k);
    f.snr_db = snr_from_energies(s, e);
    out.push_back(f);
  }
  return out;
}

int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

ModelProbe probe_model(SparkModel& model, const std::vector<int32_t>& prompt, int64_t greedy_steps,
                       ThreadPool& pool) {
  if (prompt.empty()) throw Error("probe: empty prompt");
  const int64_t vocab = model.config().vocab_size;
  KvPagePool kv_pool(model.config(), 16, 0);
  SequenceKv kv(kv_pool);
  ModelProbe probe;
  const int64_t total = static_cast<int64_t>(prompt.size()) + greedy_steps;
  if (total > model.max_model_len()) throw Error("probe: prompt + greedy tokens exceed max_model_len");
  if (!kv.reserve(total)) throw Error("probe: KV cache reservation failed");
  SequenceChunk chunk{&kv, prompt.data(), static_cast<int64_t>(prompt.size()), LogitsMode::kAll};
  model.forward(std::span<const SequenceChunk>(&chunk, 1), probe.logits, pool);
  std::vector<float> step;
  int32_t next = static_cast<int32_t>(argmax(probe.logits.data() + (prompt.size() - 1) * vocab, vocab));
  for (int64_t i = 0; i < greedy_steps; ++i) {
    probe.greedy.push_back(next);
    if (i + 1 == greedy_steps) break;
    SequenceChunk c{&kv, &probe.greedy.back(), 1, LogitsMode::kLast};
    model.forward(std::span<const SequenceChunk>(&c, 1), step, pool);
    next = static_cast<int32_t>(argmax(step.data(), vocab));
  }
  return probe;
}

LogitsFidelity compare_probes(const ModelProbe& reference, const ModelProbe& test, int64_t vocab) {
  if (reference.logits.size() != test.logits.size() || reference.greedy.size() != test.greedy.size()) {
    throw Error("compare_probes: the probes ran different prompts");
  }
  LogitsFidelity f;
  f.positions = static_cast<int64_t>(reference.logits.size()) / vocab;
  f.snr_db = snr_db(reference.logits.data(), test.logits.data(), reference.logits.size());
  for (int64_t p = 0; p < f.positions; ++p) {
    f.top1_agree +=
        argmax(reference.logits.data() + p * vocab, vocab) == argmax(test.logits.data() + p * vocab, vocab);
  }
  f.greedy_steps = static_cast<int64_t>(reference.greedy.size());
  while (f.greedy_identical < f.greedy_steps && reference.greedy[static_cast<size_t>(f.greedy_identical)] ==
                                                    test.greedy[static_cast<size_t>(f.greedy_identical)]) {
    ++f.greedy_identical;
  }
  return f;
}

}  // namespace spark
