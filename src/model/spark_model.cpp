#include "model/spark_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "activation/activation.h"
#include "attention/attention.h"
#include "gemm/path_report.h"
#include "spark/error.h"
#include "util/fp8.h"
#include "util/half.h"

namespace spark {

namespace {

using kernels::FloatDType;
using kernels::FloatWeight;

FloatDType float_dtype_of(const TensorInfo& t) {
  if (t.dtype == "F32") return FloatDType::kF32;
  if (t.dtype == "BF16") return FloatDType::kBF16;
  if (t.dtype == "F16") return FloatDType::kF16;
  throw Error(t.file + ": tensor " + t.name + ": dtype " + t.dtype + " is not a float dtype");
}

std::vector<float> vector_from(const TensorInfo& t) {
  FloatWeight w = float_weight_from(t);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  kernels::float_weight_to_f32(w, 0, t.numel(), v.data());
  return v;
}

void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t cols, double eps,
                   ThreadPool& pool) {
  pool.parallel_for(static_cast<size_t>(rows), 16, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      // Eight partial sums: one running sum is a chain of `cols` dependent additions, 2-3 us a row of
      // 2,048 (56 rows a decode step of the 1.7B; bench/RESULTS.md, session 42).
      double part[8] = {};
      int64_t i = 0;
      for (; i + 8 <= cols; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(xr[i + j]) * xr[i + j];
      }
      double ss = 0.0;
      for (; i < cols; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      for (const double p : part) ss += p;
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(cols) + eps));
      for (i = 0; i < cols; ++i) yr[i] = xr[i] * inv * w[i];
    }
  });
}

}  // namespace

FloatWeight float_weight_from(const TensorInfo& t) {
  FloatWeight w;
  w.dtype = float_dtype_of(t);
  w.data = t.data;
  w.n = t.shape.empty() ? 1 : t.shape[0];
  w.k = t.shape.size() > 1 ? t.shape[1] : 1;
  if (t.shape.size() == 1) {
    w.n = 1;
    w.k = t.shape[0];
  }
  return w;
}

void parse_quant_option(const std::string& value, const std::string& priority, ModelOptions& options) {
  if (priority == "speed") {
    options.priority = QuantPriority::kSpeed;
  } else if (priority == "fidelity") {
    options.priority = QuantPriority::kFidelity;
  } else {
    throw Error("--priority must be speed or fidelity, not '" + priority + "'");
  }
  if (value == "none") {
    options.quant = QuantChoice::kAsStored;
  } else if (value == "auto") {
    options.quant = QuantChoice::kAuto;
  } else {
    options.quant = QuantChoice::kExplicit;
    options.format = kernels::parse_weight_format(value);
  }
}

kernels::QuantizedWeight load_linear(const Checkpoint& ck, const std::string& prefix) {
  const ModelConfig& c = ck.config();
  if (c.quant_format.empty()) return kernels::float_weight_view(float_weight_from(ck.tensor(prefix + ".weight")));
  if (c.quant_layout_version != kernels::kLayoutVersion) {
    throw Error(ck.dir().string() + ": packed layout version " + std::to_string(c.quant_layout_version) +
                " was written by another spark-quantize (this build reads version " +
                std::to_string(kernels::kLayoutVersion) + "): quantize the checkpoint again");
  }
  int64_t n = 0, k = 0;
  for (const ExpectedTensor& e : expected_tensors(c)) {
    if (e.linear && e.prefix() == prefix) {
      n = e.shape[0];
      k = e.shape[1];
    }
  }
  static const std::map<std::string, kernels::TensorDType> dtypes = {
      {"I8", kernels::TensorDType::kI8},   {"U8", kernels::TensorDType::kU8},   {"I32", kernels::TensorDType::kI32},
      {"F16", kernels::TensorDType::kF16}, {"BF16", kernels::TensorDType::kBF16}, {"F32", kernels::TensorDType::kF32}};
  std::vector<kernels::PackedTensor> packed;
  for (const char* part : {"qweight", "scales", "row_sums", "params"}) {
    const std::string name = prefix + "." + part;
    if (!ck.has_tensor(name)) continue;
    const TensorInfo& t = ck.tensor(name);
    auto dt = dtypes.find(t.dtype);
    if (dt == dtypes.end()) throw Error(t.file + ": tensor " + name + ": dtype " + t.dtype + " is not a packed dtype");
    packed.push_back({part, dt->second, t.shape, t.data, static_cast<size_t>(t.nbytes)});
  }
  return kernels::view_packed_tensors(kernels::parse_weight_format(c.quant_format), n, k, packed,
                                      ck.dir().string() + ": " + prefix);
}

namespace {

kernels::WeightFormat choose_format(const Checkpoint& ck, const ModelOptions& o) {
  const ModelConfig& c = ck.config();
  const kernels::WeightFormat stored =
      !c.quant_format.empty() ? kernels::parse_weight_format(c.quant_format)
                              : float_weight_view(float_weight_from(ck.tensor("model.embedding.weight"))).format;
  if (o.quant == QuantChoice::kAsStored) return stored;
  kernels::WeightFormat want = o.format;
  if (o.quant == QuantChoice::kAuto) {
    const kernels::HardwareReport report = kernels::hardware_report();
    const char* use = o.priority == QuantPriority::kFidelity ? "fidelity" : "single-stream decode";
    want = kernels::WeightFormat::kW4A16;
    for (const auto& a : report.advice) {
      if (a.use == use) want = a.format;
    }
  }
  if (!c.quant_format.empty() && want != stored) {
    throw Error(ck.dir().string() + ": this checkpoint is pre-quantized to " + c.quant_format +
                "; it cannot be converted to " + kernels::weight_format_name(want) +
                " (load the original float checkpoint instead)");
  }
  return want;
}

// Weights kept as stored need no conversion work, so no pool threads either.
ThreadPool& inline_pool() {
  static ThreadPool pool(1);  // size 1 runs every task on the caller: safe to share between threads
  return pool;
}

}  // namespace

SparkModel::SparkModel(std::shared_ptr<const Checkpoint> checkpoint, int64_t max_model_len)
    : SparkModel(std::move(checkpoint), ModelOptions{max_model_len}, inline_pool()) {}

SparkModel::SparkModel(std::shared_ptr<const Checkpoint> checkpoint, const ModelOptions& options, ThreadPool& pool)
    : checkpoint_(std::move(checkpoint)),
      config_(checkpoint_->config()),
      max_model_len_(options.max_model_len),
      rope_sliding_(config_.rope_sliding, options.max_model_len),
      rope_full_(config_.rope_full, options.max_model_len) {
  if (options.max_model_len <= 0) throw Error("max_model_len must be positive");
  const Checkpoint& ck = *checkpoint_;
  format_ = choose_format(ck, options);
  if (options.bf16_activations && format_ != kernels::WeightFormat::kBF16) {
    throw Error(std::string("--bf16-activations needs bf16 weights; this model's linear layers are ") +
                kernels::weight_format_name(format_) + " (use --quant bf16 or a bf16 checkpoint)");
  }
  // A linear weight in the chosen format: viewed in place when the checkpoint already holds it that way,
  // else quantized (row blocks, so only the result is allocated).
  auto linear = [&](const std::string& prefix) {
    kernels::QuantizedWeight w = load_linear(ck, prefix);
    if (w.format != format_) w = kernels::quantize_weight(w.as_float(), format_, pool);
    w.bf16_activations = options.bf16_activations;
    return w;
  };
  embedding_ = linear("model.embedding");
  lm_head_ = config_.tie_word_embeddings ? embedding_ : linear("lm_head");
  final_norm_ = vector_from(ck.tensor("model.norm.weight"));
  int n_sliding = 0, n_full = 0;
  for (int i = 0; i < config_.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer l;
    l.type = config_.layer_types[static_cast<size_t>(i)];
    l.type_index = l.type == LayerType::kSliding ? n_sliding++ : n_full++;
    l.attn_norm = vector_from(ck.tensor(p + "input_layernorm.weight"));
    l.ffn_norm = vector_from(ck.tensor(p + "post_attention_layernorm.weight"));
    l.qkv = linear(p + "self_attn.q_k_v_proj");
    l.gate = kernels::float_weight_view(float_weight_from(ck.tensor(p + "self_attn.g_proj.weight")));
    l.out = linear(p + "self_attn.out_proj");
    l.ffn_gate = linear(p + "mlp.gate_proj");
    l.ffn_up = linear(p + "mlp.up_proj");
    l.ffn_down = linear(p + "mlp.down_proj");
    layers_.push_back(std::move(l));
  }
}

int64_t SparkModel::weight_bytes() const {
  int64_t n = static_cast<int64_t>(embedding_.bytes());
  if (!config_.tie_word_embeddings) n += static_cast<int64_t>(lm_head_.bytes());
  for (const Layer& l : layers_) {
    for (const auto* w : {&l.qkv, &l.gate, &l.out, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) n += static_cast<int64_t>(w->bytes());
  }
  return n;
}

std::vector<std::pair<std::string, const kernels::QuantizedWeight*>> SparkModel::linear_weights() const {
  std::vector<std::pair<std::string, const kernels::QuantizedWeight*>> out;
  out.emplace_back("model.embedding", &embedding_);
  if (!config_.tie_word_embeddings) out.emplace_back("lm_head", &lm_head_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const Layer& l = layers_[i];
    out.emplace_back(p + "self_attn.q_k_v_proj", &l.qkv);
    out.emplace_back(p + "self_attn.out_proj", &l.out);
    out.emplace_back(p + "mlp.gate_proj", &l.ffn_gate);
    out.emplace_back(p + "mlp.up_proj", &l.ffn_up);
    out.emplace_back(p + "mlp.down_proj", &l.ffn_down);
  }
  return out;
}

void SparkModel::store_kv(const Layer& layer, std::span<const SequenceChunk> chunks) {
  const int q_dim = config_.q_dim(), kv_dim = config_.kv_dim(), qkv_dim = config_.qkv_dim();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    const int64_t start = ch.kv->num_tokens();
    const bool sliding = layer.type == LayerType::kSliding;
    // The ring takes only the chunk's last window-1 positions; a prefix-cache capture takes them all.
    const int64_t ring_first = sliding ? std::max<int64_t>(0, ch.num_tokens - ch.kv->ring_capacity()) : 0;
    // f32: the K and V floats of the step's qkv row; bf16 or fp8: the rounded copy made by round_kv.
    const bool rounded = ch.kv->pool().dtype() != KvDtype::kF32;
    // Rings and captures take whole rows; a full layer's block may keep each KV head's rows apart.
    const int64_t esize = ch.kv->pool().element_bytes(), hd = config_.head_dim;
    const int64_t head_stride = sliding ? hd : ch.kv->pool().full_head_stride();
    const auto put = [&](int64_t i, int kv, void* dst) {
      const int64_t r = chunk_begin_[c] + i;
      const char* src = rounded
                            ? kv_rounded_.data() + (r * 2 + kv) * kv_dim * esize
                            : reinterpret_cast<const char*>(qkv_.data() + r * qkv_dim + q_dim + kv * kv_dim);
      if (head_stride == hd) {
        std::memcpy(dst, src, static_cast<size_t>(kv_dim * esize));
        return;
      }
      for (int h = 0; h < config_.num_kv_heads; ++h) {
        std::memcpy(static_cast<char*>(dst) + h * head_stride * esize, src + h * hd * esize,
                    static_cast<size_t>(hd * esize));
      }
    };
    for (int64_t i = 0; i < ch.num_tokens; ++i) {
      const int64_t pos = start + i;
      if (sliding) {
        if (void* ck = ch.kv->capture_keys(layer.type_index, pos)) {
          put(i, 0, ck);
          put(i, 1, ch.kv->capture_values(layer.type_index, pos));
        }
        if (i < ring_first) continue;
      }
      put(i, 0, sliding ? ch.kv->ring_keys(layer.type_index, pos) : ch.kv->full_keys(layer.type_index, pos));
      put(i, 1, sliding ? ch.kv->ring_values(layer.type_index, pos) : ch.kv->full_values(layer.type_index, pos));
    }
  }
}

void SparkModel::round_kv(int64_t total, KvDtype dtype, ThreadPool& pool) {
  const int q_dim = config_.q_dim(), kv_dim = config_.kv_dim(), qkv_dim = config_.qkv_dim();
  const int64_t row_bytes = 2 * static_cast<int64_t>(kv_dim) * kv_element_bytes(dtype);
  kv_rounded_.resize(static_cast<size_t>(total * row_bytes));
  pool.parallel_for(static_cast<size_t>(total), 16, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const float* src = qkv_.data() + static_cast<int64_t>(r) * qkv_dim + q_dim;
      char* row = kv_rounded_.data() + static_cast<int64_t>(r) * row_bytes;
      if (dtype == KvDtype::kFp8) {
        uint8_t* dst = reinterpret_cast<uint8_t*>(row);
        for (int i = 0; i < 2 * kv_dim; ++i) dst[i] = f32_to_fp8_e4m3(src[i]);
      } else {
        uint16_t* dst = reinterpret_cast<uint16_t*>(row);
        for (int i = 0; i < 2 * kv_dim; ++i) dst[i] = f32_to_bf16(src[i]);
      }
    }
  });
}

void SparkModel::attention(const Layer& layer, std::span<const SequenceChunk> chunks, ThreadPool& pool) {
  const int hd = config_.head_dim, n_heads = config_.num_heads;
  const int q_dim = config_.q_dim(), kv_dim = config_.kv_dim(), qkv_dim = config_.qkv_dim();
  const bool sliding = layer.type == LayerType::kSliding;
  const int64_t window = sliding ? config_.sliding_window : 0;

  // Each chunk's keys as runs of evenly strided rows: earlier positions from the cache (a full layer's
  // blocks, or the sliding ring, which wraps and spans pages), this chunk's own from this step's qkv rows.
  spans_.clear();
  first_span_.clear();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    const int64_t start = ch.kv->num_tokens();
    const bool rounded = ch.kv->pool().dtype() != KvDtype::kF32;
    const int64_t esize = ch.kv->pool().element_bytes();
    const int64_t row_bytes = static_cast<int64_t>(kv_dim) * esize;
    const auto after = [row_bytes](const void* row, int64_t n) {
      return static_cast<const char*>(row) + n * row_bytes;
    };
    const int64_t lo = sliding ? std::max<int64_t>(0, start - window + 1) : 0;
    first_span_.push_back(spans_.size());
    for (int64_t p = lo; p < start;) {
      auto k_at = [&](int64_t kp) {
        return sliding ? ch.kv->ring_keys(layer.type_index, kp) : ch.kv->full_keys(layer.type_index, kp);
      };
      auto v_at = [&](int64_t kp) {
        return sliding ? ch.kv->ring_values(layer.type_index, kp) : ch.kv->full_values(layer.type_index, kp);
      };
      // A full layer's block is one span (its rows may be grouped by KV head); ring runs are found entry
      // by entry.
      const KvPagePool& pool_kv = ch.kv->pool();
      const int64_t bs = pool_kv.block_size();
      kernels::KvSpan s{p, 1, k_at(p), v_at(p), kv_dim};
      if (!sliding) {
        s.count = std::min(bs - p % bs, start - p);
        s.stride = pool_kv.full_row_stride();
        s.head_stride = pool_kv.full_head_stride();
      }
      while (sliding && p + s.count < start && k_at(p + s.count) == after(s.k, s.count) &&
             v_at(p + s.count) == after(s.v, s.count)) {
        ++s.count;
      }
      spans_.push_back(s);
      p += s.count;
    }
    if (rounded) {
      const char* own = kv_rounded_.data() + chunk_begin_[c] * 2 * row_bytes;
      spans_.push_back({start, ch.num_tokens, own, own + row_bytes, 2 * kv_dim});
    } else {
      const float* own = qkv_.data() + chunk_begin_[c] * qkv_dim + q_dim;
      spans_.push_back({start, ch.num_tokens, own, own + kv_dim, qkv_dim});
    }
  }
  attn_tasks_.clear();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    const size_t end = c + 1 < chunks.size() ? first_span_[c + 1] : spans_.size();
    kernels::AttentionTask t;
    t.q = qkv_.data() + chunk_begin_[c] * qkv_dim;
    t.q_stride = qkv_dim;
    t.out = attn_.data() + chunk_begin_[c] * q_dim;
    t.out_stride = q_dim;
    t.rows = ch.num_tokens;
    t.first_pos = ch.kv->num_tokens();
    t.window = window;
    t.kv = std::span<const kernels::KvSpan>(spans_.data() + first_span_[c], end - first_span_[c]);
    t.kv_dtype = ch.kv->pool().dtype();
    attn_tasks_.push_back(t);
  }
  const kernels::AttentionShape shape{n_heads, config_.num_kv_heads, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  kernels::attention(shape, attn_tasks_, pool);

  // The head-wise output gate scales each head's output.
  const int64_t total = static_cast<int64_t>(token_pos_.size());
  pool.parallel_for(static_cast<size_t>(total), 16, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      for (int h = 0; h < n_heads; ++h) {
        const float g = gate_[r * static_cast<size_t>(n_heads) + static_cast<size_t>(h)];
        float* o = attn_.data() + static_cast<int64_t>(r) * q_dim + static_cast<int64_t>(h) * hd;
        for (int d = 0; d < hd; ++d) o[d] *= g;
      }
    }
  });
}

void SparkModel::forward(std::span<const SequenceChunk> chunks, std::vector<float>& logits,
                         ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int q_dim = c.q_dim(), qkv_dim = c.qkv_dim(), n_heads = c.num_heads;

  if (chunks.empty()) throw Error("forward: no chunks");
  int64_t total = 0, logit_rows = 0;
  chunk_begin_.clear();
  token_pos_.clear();
  for (const SequenceChunk& ch : chunks) {
    if (ch.kv == nullptr || ch.num_tokens <= 0) throw Error("forward: empty chunk");
    const int64_t start = ch.kv->num_tokens();
    if (start + ch.num_tokens > max_model_len_) {
      throw Error("sequence of " + std::to_string(start + ch.num_tokens) + " tokens exceeds max_model_len " +
                  std::to_string(max_model_len_));
    }
    if (ch.kv->reserved_tokens() < start + ch.num_tokens ||
        (c.num_sliding_layers() > 0 && ch.kv->ring().empty())) {
      throw Error("forward: KV space not reserved for the chunk (SequenceKv::reserve)");
    }
    for (int64_t i = 0; i < ch.num_tokens; ++i) {
      if (ch.tokens[i] < 0 || ch.tokens[i] >= c.vocab_size) {
        throw Error("token id " + std::to_string(ch.tokens[i]) + " is outside the vocabulary (size " +
                    std::to_string(c.vocab_size) + ")");
      }
      token_pos_.push_back(start + i);
    }
    chunk_begin_.push_back(total);
    total += ch.num_tokens;
    logit_rows += ch.logits == LogitsMode::kAll ? ch.num_tokens : ch.logits == LogitsMode::kLast ? 1 : 0;
  }
  // The chunks of one step share the engine's KV pool, so one element type: bf16 and fp8 K/V are
  // rounded once per step (round_kv) and read from that copy by the chunk's own rows and the cache store.
  const KvDtype kv_dtype = chunks.front().kv->pool().dtype();
  for (const SequenceChunk& ch : chunks) {
    if (ch.kv->pool().dtype() != kv_dtype) throw Error("forward: chunks with different KV element types");
  }
  x_.resize(static_cast<size_t>(total * hidden));
  h_.resize(x_.size());
  qkv_.resize(static_cast<size_t>(total * qkv_dim));
  gate_.resize(static_cast<size_t>(total * n_heads));
  attn_.resize(static_cast<size_t>(total * q_dim));
  proj_.resize(x_.size());
  ffn_gate_.resize(static_cast<size_t>(total * inter));
  ffn_up_.resize(ffn_gate_.size());

  int64_t row = 0;
  for (const SequenceChunk& ch : chunks) {
    for (int64_t i = 0; i < ch.num_tokens; ++i, ++row) {
      kernels::dequantize_row(embedding_, ch.tokens[i], x_.data() + row * hidden);
    }
  }
  tap("embed", -1, x_.data(), total, hidden);

  for (int li = 0; li < c.num_layers; ++li) {
    const Layer& layer = layers_[static_cast<size_t>(li)];
    rms_norm_rows(x_.data(), layer.attn_norm.data(), h_.data(), total, hidden, c.rms_norm_eps, pool);
    tap("attn_norm", li, h_.data(), total, hidden);

    kernels::gemm(h_.data(), total, layer.qkv, qkv_.data(), qkv_dim, pool);
    tap("qkv", li, qkv_.data(), total, qkv_dim);
    kernels::gemm(h_.data(), total, layer.gate, gate_.data(), n_heads, pool);
    for (float& g : gate_) {
      const float s = 1.0f / (1.0f + std::exp(-g));
      g = c.gate_activation == GateActivation::kSigmoid ? s : g * s;
    }
    tap("attn_gate", li, gate_.data(), total, n_heads);

    const RopeTable& rope = layer.type == LayerType::kSliding ? rope_sliding_ : rope_full_;
    pool.parallel_for(static_cast<size_t>(total), 16, [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r) {
        float* q = qkv_.data() + static_cast<int64_t>(r) * qkv_dim;
        rope.apply(q, n_heads, c.head_dim, token_pos_[r]);
        rope.apply(q + q_dim, c.num_kv_heads, c.head_dim, token_pos_[r]);
      }
    });
    tap("qkv_rope", li, qkv_.data(), total, qkv_dim);
    if (kv_dtype != KvDtype::kF32) round_kv(total, kv_dtype, pool);

    // Full layers read every key from the blocks, so this chunk's keys go in first; sliding layers
    // read this chunk's keys from qkv_ and must not overwrite ring entries still being attended to.
    if (layer.type == LayerType::kFull) store_kv(layer, chunks);
    attention(layer, chunks, pool);
    if (layer.type == LayerType::kSliding) store_kv(layer, chunks);
    tap("attn_out", li, attn_.data(), total, q_dim);

    kernels::gemm(attn_.data(), total, layer.out, proj_.data(), hidden, pool);
    tap("attn_proj", li, proj_.data(), total, hidden);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += proj_[i];
    tap("resid_attn", li, x_.data(), total, hidden);

    rms_norm_rows(x_.data(), layer.ffn_norm.data(), h_.data(), total, hidden, c.rms_norm_eps, pool);
    tap("ffn_norm", li, h_.data(), total, hidden);
    kernels::gemm(h_.data(), total, layer.ffn_gate, ffn_gate_.data(), inter, pool);
    kernels::gemm(h_.data(), total, layer.ffn_up, ffn_up_.data(), inter, pool);
    tap("ffn_gate", li, ffn_gate_.data(), total, inter);
    tap("ffn_up", li, ffn_up_.data(), total, inter);
    // Exact erf GELU, as the reference model uses (not the tanh approximation).
    pool.parallel_for(ffn_gate_.size(), 4096, [&](size_t begin, size_t end) {
      kernels::geglu(ffn_gate_.data() + begin, ffn_up_.data() + begin, ffn_gate_.data() + begin, end - begin);
    });
    tap("ffn_act", li, ffn_gate_.data(), total, inter);
    kernels::gemm(ffn_gate_.data(), total, layer.ffn_down, proj_.data(), hidden, pool);
    tap("ffn_out", li, proj_.data(), total, hidden);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += proj_[i];
    tap("resid", li, x_.data(), total, hidden);
  }

  // Only the rows that need logits go through the final norm and the (large) output head.
  head_in_.resize(static_cast<size_t>(logit_rows * hidden));
  int64_t out_row = 0;
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const SequenceChunk& ch = chunks[ci];
    if (ch.logits == LogitsMode::kNone) continue;
    const int64_t first = ch.logits == LogitsMode::kAll ? 0 : ch.num_tokens - 1;
    for (int64_t i = first; i < ch.num_tokens; ++i, ++out_row) {
      std::copy_n(x_.data() + (chunk_begin_[ci] + i) * hidden, hidden, head_in_.data() + out_row * hidden);
    }
  }
  logits.resize(static_cast<size_t>(logit_rows * c.vocab_size));
  if (logit_rows == 0) {
    for (const SequenceChunk& ch : chunks) ch.kv->advance(ch.num_tokens);
    return;
  }
  rms_norm_rows(head_in_.data(), final_norm_.data(), head_in_.data(), logit_rows, hidden, c.rms_norm_eps,
                pool);
  tap("final_norm", -1, head_in_.data(), logit_rows, hidden);
  kernels::gemm(head_in_.data(), logit_rows, lm_head_, logits.data(), c.vocab_size, pool);
  tap("logits", -1, logits.data(), logit_rows, c.vocab_size);

  for (const SequenceChunk& ch : chunks) ch.kv->advance(ch.num_tokens);
}

}  // namespace spark
