// Causal attention over a paged / ring KV cache, as a kernel family: a scalar reference and per-ISA
// bodies behind one dispatch. One work item is one KV head and a tile of query rows: the query heads
// of that KV group and every row of the tile share each K/V row as it is read, keys are taken in blocks
// with an online softmax (running max and sum per query), and items spread over the thread pool.
#pragma once

#include <cstdint>
#include <span>

#include "util/thread_pool.h"

namespace spark::kernels {

// How K and V rows are stored: f32; bf16 (the upper half of an f32, round to nearest even when stored),
// which halves the bytes a long context's decode step streams; or FP8 E4M3 (util/fp8.h: round to nearest
// even, saturating at +-448), a quarter. The kernels widen bf16 and fp8 rows to f32 exactly as they load
// them, so the math is the same as on f32 rows holding those values.
enum class KvDtype : uint8_t { kF32, kBf16, kFp8 };

// Bytes per stored element, and the name the --kv-cache-dtype flag and the logs use.
constexpr int kv_element_bytes(KvDtype dtype) {
  return dtype == KvDtype::kBf16 ? 2 : dtype == KvDtype::kFp8 ? 1 : 4;
}
constexpr const char* kv_dtype_name(KvDtype dtype) {
  return dtype == KvDtype::kBf16 ? "bf16" : dtype == KvDtype::kFp8 ? "fp8" : "f32";
}

// Consecutive key positions whose K and V rows are evenly strided in memory (a cache block, a run of
// a ring, or the rows of the chunk being computed), elements of the task's kv_dtype.
struct KvSpan {
  int64_t pos = 0;          // position of the first row
  int64_t count = 0;        // rows
  const void* k = nullptr;  // KV head h of row i: k + i * stride + h * head_stride (in elements)
  const void* v = nullptr;
  int64_t stride = 0;       // elements between consecutive rows
  int64_t head_stride = 0;  // elements between KV heads of a row; 0: head_dim (heads side by side)
};

// One sequence's chunk: query row r sits at position first_pos + r and attends to the keys at positions
// max(0, pos - window + 1) .. pos (window 0: every earlier position). `kv` lists those keys in rising
// position order with no gaps; it may start earlier than the first row's window needs.
struct AttentionTask {
  const float* q = nullptr;  // head h of row r: q + r * q_stride + h * head_dim
  int64_t q_stride = 0;
  float* out = nullptr;  // softmax(q kᵀ · scale) v, same indexing with out_stride
  int64_t out_stride = 0;
  int64_t rows = 0;
  int64_t first_pos = 0;
  int64_t window = 0;
  std::span<const KvSpan> kv;
  KvDtype kv_dtype = KvDtype::kF32;  // of every span in kv
};

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads; query head h reads KV head h / (num_heads / num_kv_heads)
  int head_dim = 0;
  float scale = 1.0f;
};

// Runs every task on the pool at the active instruction-set tier. A row of a multi-row task gets a result
// that depends only on its query and the keys it sees (not on how rows are grouped into tasks or tiles,
// nor on the tier): keys are blocked at fixed multiples of kAttentionKeyBlock positions and every sum runs
// in position order. A one-row task (decode) forms its scores as dot products, and over more than 512
// keys is split into 512-position parts merged in position order (split-K; same tolerance).
void attention(const AttentionShape& shape, std::span<const AttentionTask> tasks, ThreadPool& pool);

// Scalar reference (two passes, double accumulation, single thread): the ground truth.
void attention_ref(const AttentionShape& shape, const AttentionTask& task);

inline constexpr int64_t kAttentionKeyBlock = 64;

}  // namespace spark::kernels
