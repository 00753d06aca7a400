// spark-attention-bench: the attention kernels alone on the model's KV layout (issue 16 goal, issue 17
// item 5), so their share of a step can be measured without the GEMMs around them.
//  - prefill after a prefix: R rows at position P attending to P full-layer keys (paged blocks) or to a
//    sliding ring of window - 1 entries; reported as GFLOP/s of QKᵀ + PV (4 * heads * head_dim per
//    query-key pair) against the machine's f32 FMA peak.
//  - decode at depth D: one row over D full-layer keys; reported as GB/s of K and V read (each KV head's
//    rows once) against the machine's read bandwidth.
// Keys live as the KV cache lays them out: 16-position blocks, each page [layer][K, V][16][kv_dim] for
// all full layers (bf16 and fp8: [layer][K, V][KV head][16][head_dim]; --kv-layout picks either), pages
// scattered in one arena.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "attention/attention.h"
#include "cpu/cpu_features.h"
#include "roofline/roofline.h"
#include "util/fp8.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace {

using spark::ThreadPool;
using namespace spark::kernels;

struct Options {
  int threads = 2;
  int reps = 5;
  int heads = 8, kv_heads = 2, head_dim = 256;
  int layers = 7;  // full layers sharing a page (the 1.7B shape: 7)
  KvDtype kv_dtype = KvDtype::kF32;
  std::string kv_layout = "cache";  // cache (as the KV cache: heads for bf16, rows for f32), rows, heads
  bool head_major = false;          // a block's rows grouped by KV head
  int64_t prefix = 2048, rows = 32, window = 512;
  std::vector<int64_t> depths{1024, 8192};
};

double seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The fastest repetition: on a shared machine the others measure the load as much as the kernel.
double fastest(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

// A cache of `n` positions of one layer (layer `layer` of `layers` in each page) as 16-position spans, plus
// `rows` own rows in qkv-like rows whose first heads * head_dim floats are the queries. K/V elements are
// f32, bf16 or fp8 (--kv-dtype), the own rows too (bf16 and fp8 ones in a separate K|V buffer, as the model
// keeps them).
// The arena on transparent huge pages, as the KV page pool's bounded mapping is.
struct Arena {
  char* data = nullptr;
  size_t bytes = 0;
  explicit Arena(size_t n) : bytes(std::max<size_t>(n, 1)) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    data = static_cast<char*>(p);
  }
  ~Arena() { munmap(data, bytes); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
};

struct Keys {
  std::shared_ptr<Arena> arena;
  std::vector<float> own, out;
  std::vector<char> own_rounded;
  std::vector<KvSpan> spans;
  AttentionTask task;
};

// Fills `count` elements at `dst` (of `dtype`) with values from `value`.
template <class F>
void fill(void* dst, size_t count, KvDtype dtype, F&& value) {
  for (size_t i = 0; i < count; ++i) {
    const float v = value(i);
    if (dtype == KvDtype::kBf16) {
      static_cast<uint16_t*>(dst)[i] = spark::f32_to_bf16(v);
    } else if (dtype == KvDtype::kFp8) {
      static_cast<uint8_t*>(dst)[i] = spark::f32_to_fp8_e4m3(v);
    } else {
      static_cast<float*>(dst)[i] = v;
    }
  }
}

// Keys of every one of o.layers full layers at depth n, sharing one arena (the decode case: a step reads
// each layer's keys in turn, as the model does, so the sum of them, not one layer, must fit in the caches
// for a repetition to find them there), or one sliding ring (window > 0, one element of the result).
std::vector<Keys> make_keys(const Options& o, int64_t n, int64_t rows, int64_t window, std::mt19937& rng) {
  constexpr int64_t bs = 16;
  const int kv_dim = o.kv_heads * o.head_dim, q_dim = o.heads * o.head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim, page = static_cast<int64_t>(o.layers) * 2 * bs * kv_dim;
  const size_t esize = static_cast<size_t>(kv_element_bytes(o.kv_dtype));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t lo = window > 0 ? std::max<int64_t>(0, n - window + 1) : 0;
  const int n_keys = window > 0 ? 1 : o.layers;
  std::vector<Keys> keys(static_cast<size_t>(n_keys));
  std::shared_ptr<Arena> arena;
  const auto at = [&](int64_t element) { return arena->data + static_cast<size_t>(element) * esize; };
  if (window > 0) {
    // One ring of window - 1 entries: K entries then V entries.
    const int64_t cap = window - 1;
    arena = std::make_shared<Arena>(static_cast<size_t>(2 * cap * kv_dim) * esize);
    fill(arena->data, static_cast<size_t>(2 * cap * kv_dim), o.kv_dtype, [&](size_t) { return dist(rng); });
    for (int64_t p = lo; p < n;) {
      const int64_t e = p % cap, c = std::min(cap - e, n - p);
      keys[0].spans.push_back({p, c, at(e * kv_dim), at((cap + e) * kv_dim), kv_dim});
      p += c;
    }
  } else {
    const int64_t blocks = (n + bs - 1) / bs;
    std::vector<int64_t> order(static_cast<size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t elements = static_cast<size_t>(std::max<int64_t>(1, blocks) * page);
    arena = std::make_shared<Arena>(elements * esize);
    fill(arena->data, elements, o.kv_dtype, [&](size_t i) { return (i % 7 == 0) ? dist(rng) : 0.5f; });
    for (int layer = 0; layer < n_keys; ++layer) {
      for (int64_t p = 0; p < n; p += bs) {
        const int64_t base = order[static_cast<size_t>(p / bs)] * page + layer * 2 * bs * kv_dim;
        keys[static_cast<size_t>(layer)].spans.push_back(
            {p, std::min(bs, n - p), at(base), at(base + bs * kv_dim), o.head_major ? o.head_dim : kv_dim,
             o.head_major ? bs * o.head_dim : 0});
      }
    }
  }
  for (Keys& k : keys) {
    k.arena = arena;
    k.own.resize(static_cast<size_t>(rows * qkv_dim));
    for (float& f : k.own) f = dist(rng);
    if (o.kv_dtype != KvDtype::kF32) {
      k.own_rounded.resize(static_cast<size_t>(rows * 2 * kv_dim) * esize);
      for (int64_t r = 0; r < rows; ++r) {
        fill(k.own_rounded.data() + static_cast<size_t>(r * 2 * kv_dim) * esize,
             static_cast<size_t>(2 * kv_dim), o.kv_dtype,
             [&](size_t i) { return k.own[static_cast<size_t>(r * qkv_dim + q_dim) + i]; });
      }
      k.spans.push_back({n, rows, k.own_rounded.data(), k.own_rounded.data() + kv_dim * esize, 2 * kv_dim});
    } else {
      k.spans.push_back({n, rows, k.own.data() + q_dim, k.own.data() + q_dim + kv_dim, qkv_dim});
    }
    k.out.assign(static_cast<size_t>(rows * q_dim), 0.0f);
    k.task.q = k.own.data();
    k.task.q_stride = qkv_dim;
    k.task.out = k.out.data();
    k.task.out_stride = q_dim;
    k.task.rows = rows;
    k.task.first_pos = n;
    k.task.window = window;
    k.task.kv = k.spans;
    k.task.kv_dtype = o.kv_dtype;
  }
  return keys;
}

// The fastest repetition of one pass over every element of `keys`, one attention call each.
double time_it(const Options& o, const std::vector<Keys>& keys, ThreadPool& pool, int reps) {
  const AttentionShape shape{o.heads, o.kv_heads, o.head_dim,
                             1.0f / std::sqrt(static_cast<float>(o.head_dim))};
  const auto pass = [&] {
    for (const Keys& k : keys) attention(shape, std::span<const AttentionTask>(&k.task, 1), pool);
  };
  pass();  // warm
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto s = std::chrono::steady_clock::now();
    pass();
    t.push_back(seconds(s));
  }
  return fastest(t);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("spark-attention-bench: attention kernels alone on the KV cache's layout");
  app.add_option("--threads", o.threads)->check(CLI::Range(1, 1024));
  app.add_option("--reps", o.reps, "repetitions (the fastest is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--prefix", o.prefix, "keys before the prefill rows (0: skip the prefill cases)");
  app.add_option("--rows", o.rows, "prefill rows after the prefix");
  app.add_option("--window", o.window, "sliding window of the ring case");
  app.add_option("--layers", o.layers, "full layers interleaved in each KV page (the layout's page stride)");
  app.add_option("--kv-dtype", o.kv_dtype, "K/V element type: f32, bf16 or fp8")
      ->transform(CLI::CheckedTransformer(std::map<std::string, KvDtype>{
          {"f32", KvDtype::kF32}, {"bf16", KvDtype::kBf16}, {"fp8", KvDtype::kFp8}}));
  app.add_option(
         "--kv-layout", o.kv_layout,
         "a full-layer block's rows: cache (as the KV cache keeps them: heads with bf16 and fp8, rows "
         "with f32), heads (each KV head's positions contiguous) or rows (every KV head of a position side "
         "by side)")
      ->check(CLI::IsMember({"cache", "heads", "rows"}));
  app.add_option("--depths", o.depths, "decode depths (keys before the decoded row)")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  o.head_major = o.kv_layout == "heads" || (o.kv_layout == "cache" && o.kv_dtype != KvDtype::kF32);
  ThreadPool pool(o.threads);
  std::mt19937 rng(7);
  std::printf("tier %s, %d threads, %d/%d heads x %d, KV %s, blocks by %s\n", isa_name(active_isa()),
              o.threads, o.heads, o.kv_heads, o.head_dim, kv_dtype_name(o.kv_dtype),
              o.head_major ? "head" : "row");
  const double pair_flops = 4.0 * o.heads * o.head_dim;
  // The ceilings in the same run (same load): streaming read over 4x the last-level cache, f32 FMA peak,
  // best of 5 single passes each, as the kernels' timings are the fastest repetition.
  double read_gbps = 0, fma_gflops = 0;
  for (int i = 0; i < 5; ++i) {
    read_gbps = std::max(read_gbps, measure_read_bandwidth(pool, 0, 1));
    fma_gflops = std::max(fma_gflops, measure_fma_peak(pool, 1));
  }
  std::printf("same-run ceilings: read %.1f GB/s, f32 FMA %.1f GFLOP/s\n", read_gbps, fma_gflops);
  if (o.prefix > 0) {
    for (int64_t window : {int64_t{0}, o.window}) {
      std::vector<Keys> k = make_keys(o, o.prefix, o.rows, window, rng);
      k.resize(1);  // one layer's prefill
      double pairs = 0;
      for (int64_t r = 0; r < o.rows; ++r) {
        const int64_t pos = o.prefix + r;
        pairs += static_cast<double>(pos - (window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0) + 1);
      }
      const double s = time_it(o, k, pool, o.reps);
      std::printf("prefill %lld rows after %lld keys, %s: %.3f ms, %.1f GFLOP/s (%.0f%% of peak)\n",
                  static_cast<long long>(o.rows), static_cast<long long>(o.prefix),
                  window > 0 ? "sliding ring" : "full (paged)", s * 1e3, pairs * pair_flops / s * 1e-9,
                  100.0 * pairs * pair_flops / s * 1e-9 / fma_gflops);
    }
  }
  for (int64_t d : o.depths) {
    const std::vector<Keys> k = make_keys(o, d, 1, 0, rng);
    const double s = time_it(o, k, pool, o.reps) / o.layers;
    const double bytes = static_cast<double>(d + 1) * 2.0 * o.kv_heads * o.head_dim *
                         static_cast<double>(kv_element_bytes(o.kv_dtype));
    std::printf(
        "decode at depth %lld, per layer of %d read in turn: %.3f ms, KV %.1f MiB, %.1f GB/s (%.0f%% of "
        "read), "
        "%.1f GFLOP/s\n",
        static_cast<long long>(d), o.layers, s * 1e3, bytes / (1 << 20), bytes / s * 1e-9,
        100.0 * bytes / s * 1e-9 / read_gbps, (d + 1) * pair_flops / s * 1e-9);
  }
  return 0;
}
