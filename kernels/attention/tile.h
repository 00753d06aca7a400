// The vector body of attention, written once over a small vector-traits type V and instantiated by
// avx2.cpp and avx512.cpp (each with its own target flags; V is local to each, so the instantiations
// are distinct). Included only by those two files.
//
// One item = one KV head x a tile of query rows; its nq = group x rows query vectors are kept transposed
// (Qt[d][q], pre-scaled) so that a score is a run of FMAs over d, vectorised across queries, each key
// element broadcast once: every K and V row is read once per item whatever the group size. Keys go in
// blocks of kAttentionKeyBlock positions aligned to multiples of it, with a running max m, sum l and
// unnormalised output O per query (online softmax). Every per-query operation is lane-wise and runs over
// d and over keys in order, so a row's result does not depend on which multi-row tile or task it sits
// in, and the AVX2 and AVX-512 bodies compute the same values. A one-row task (decode) forms its scores
// as dot products instead (scores_dot: 4x fewer FMAs than a mostly idle transposed vector), which may
// change the last bits of a decode row against the same row inside a prefill chunk. With 2 to 16 queries
// per KV head the AVX-512 body packs a decode row's scores, several keys to a vector (scores_packed).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention/attention.h"
#include "util/fp8.h"
#include "util/half.h"

namespace spark::kernels::attention_tile {

constexpr int64_t kKb = kAttentionKeyBlock;
constexpr int kQueryVectors = 64;  // query vectors per item (group x tile rows), when the group allows

// Decode rows with more keys than this are split into parts of keys at multiples of it (split-K), so a
// long context spreads over every thread instead of one item per KV head. A part's K and V rows (the
// 1.7B shape with bf16 K/V: 512 keys x 2 KiB = 1 MiB) are read by one thread, its KV heads in turn; 512
// measured a little faster than 256.
constexpr int64_t kSplitKeys = 512;

struct Item {
  int task;
  int kv_head;
  int64_t row_begin, row_end;
  int64_t keys;              // keys the tile walks: the larger items go first
  int64_t key_from, key_to;  // the item's keys (a split decode row's part; else all the rows see)
  int64_t part;              // a split part's slot for (m, l, O), or -1: write the output
  int heads = 1;             // KV heads kv_head .. kv_head + heads - 1, one after another
  int64_t part_stride = 0;   // between the part slots of consecutive heads
};

inline int64_t row_lo(const AttentionTask& t, int64_t pos) {
  return t.window > 0 ? std::max<int64_t>(0, pos - t.window + 1) : 0;
}

// K/V rows hold E = float, uint16_t (bf16) or uint8_t (FP8 E4M3); a scalar element as f32 (V::load widens a
// vector of them).
inline float widen(float x) {
  return x;
}
inline float widen(uint16_t x) {
  return bf16_to_f32(x);
}
// FP8 E4M3 (uint8_t): the vector loads widen a code c as the f16 whose bits are (sign-extended c << 7)
// with bit 14 cleared: sign at bit 15, the 4 exponent bits at 10-13, the 3 mantissa bits at 7-9. That
// f16 is the code's value times 2^-8 (its exponent bias is 15, not 7; subnormals line up the same way),
// so F16C widens it exactly; the kernels leave it at that and carry the 2^8 in the other operand
// (load_folded). The NaN codes (never stored: K/V are finite) come out as +-480 that way; the scalar
// reference reads them as NaN.
inline float widen(uint8_t x) {
  return kFp8E4M3Values[x];
}

// acc[k][v] over QV query vectors and KU keys: St[key][q] = sum_d Qt[d][q] * K[key][d], in d order.
template <class V, int QV, int KU, class E>
inline void scores_kernel(const float* qt, int64_t nqp, int hd, const E* const* kp, float* st) {
  typename V::R acc[KU][QV];
  for (int u = 0; u < KU; ++u) {
    for (int v = 0; v < QV; ++v) acc[u][v] = V::zero();
  }
  for (int d = 0; d < hd; ++d) {
    typename V::R qv[QV];
    for (int v = 0; v < QV; ++v) qv[v] = V::load(qt + d * nqp + v * V::L);
    for (int u = 0; u < KU; ++u) {
      const typename V::R kb = V::set1(widen(kp[u][d]));
      for (int v = 0; v < QV; ++v) acc[u][v] = V::fma(qv[v], kb, acc[u][v]);
    }
  }
  for (int u = 0; u < KU; ++u) {
    for (int v = 0; v < QV; ++v) V::store(st + u * nqp + v * V::L, acc[u][v]);
  }
}

// Register blocking: KU keys x QV query vectors of accumulators. With 32 vector registers (AVX-512) 6 keys
// x 4 vectors (24 accumulators, 4 query vectors, 1 broadcast); with 16 (AVX2) the smaller blocks. The
// blocking does not change any sum (each score is one FMA chain over d in order), only how often the
// transposed queries are reloaded.
template <class V, int QV, class E>
inline void scores_group(const float* qt, int64_t nqp, int hd, const E* const* kp, int64_t n, float* st) {
  constexpr int KU = V::kRegs >= 32 ? (QV >= 4 ? 6 : QV == 3 ? 7 : 8) : (QV <= 2 ? 8 : 4);
  int64_t j = 0;
  for (; j + KU <= n; j += KU) scores_kernel<V, QV, KU>(qt, nqp, hd, kp + j, st + j * nqp);
  if constexpr (KU > 4) {
    for (; j + 4 <= n; j += 4) scores_kernel<V, QV, 4>(qt, nqp, hd, kp + j, st + j * nqp);
  }
  for (; j < n; ++j) scores_kernel<V, QV, 1>(qt, nqp, hd, kp + j, st + j * nqp);
}

// A K or V vector as the kernels multiply it: fp8 codes are read as value x 2^-8 (one multiply fewer per
// vector) and the other operand carries the 2^8 (kFp8Fold): the decode scores' queries, every softmax
// weight P before the values. Both scalings are exact powers of two and each product goes into an FMA
// unrounded, so every sum is bit for bit the one of the unscaled values.
template <class V, class E>
inline typename V::R load_folded(const E* p) {
  if constexpr (std::is_same_v<E, uint8_t>) {
    return V::load_fp8_over_256(p);
  } else {
    return V::load(p);
  }
}
template <class E>
constexpr float kFp8Fold = std::is_same_v<E, uint8_t> ? 256.0f : 1.0f;

// P's stored form: P x kFp8Fold (exact), for values read by load_folded.
template <class V, class E>
inline typename V::R fold_weights(typename V::R p) {
  if constexpr (std::is_same_v<E, uint8_t>) {
    return V::mul(p, V::set1(kFp8Fold<E>));
  } else {
    return p;
  }
}

// A decode task (one row: nq = group queries, fewer than a vector's lanes) forms each score as a dot
// product over head_dim instead, so no lanes idle: St[key][q] = sum_d Q[q][d] * K[key][d] with two
// partial sums per (query, key) (even and odd vectors of d) and one horizontal add. Blocked over NK keys
// x NQ queries so each K vector load feeds NQ FMAs and 2 * NK * NQ chains hide the FMA latency. A decode
// step streams its KV once from memory and is bound by that read, so the next block is asked for key by
// key while this one is worked on: its K rows while this block is scored (`next_k`, `next_n` of them), its
// V rows while this block's values are summed (values_kernel), each at the rate this block's rows are used.
// Asking for both while scoring (as before) sent twice the requests the core can have in flight during the
// scores and none during the values. Lanes nq .. nqp-1 get 0.
template <class V, int NK, int NQ, class E>
inline void dot_kernel(const float* qr, int hd, const E* const* kp, float* st, int64_t nqp) {
  typename V::R a0[NK][NQ], a1[NK][NQ];
  for (int u = 0; u < NK; ++u) {
    for (int q = 0; q < NQ; ++q) a0[u][q] = a1[u][q] = V::zero();
  }
  int d = 0;
  for (; d + 2 * V::L <= hd; d += 2 * V::L) {
    for (int u = 0; u < NK; ++u) {
      const typename V::R k0 = load_folded<V>(kp[u] + d), k1 = load_folded<V>(kp[u] + d + V::L);
      for (int q = 0; q < NQ; ++q) {
        a0[u][q] = V::fma(V::load(qr + q * hd + d), k0, a0[u][q]);
        a1[u][q] = V::fma(V::load(qr + q * hd + d + V::L), k1, a1[u][q]);
      }
    }
  }
  if (d < hd) {
    for (int u = 0; u < NK; ++u) {
      const typename V::R k0 = load_folded<V>(kp[u] + d);
      for (int q = 0; q < NQ; ++q) a0[u][q] = V::fma(V::load(qr + q * hd + d), k0, a0[u][q]);
    }
  }
  for (int u = 0; u < NK; ++u) {
    for (int q = 0; q < NQ; ++q) st[u * nqp + q] = V::reduce(V::add(a0[u][q], a1[u][q]));
  }
}

// Asks for the 64-byte lines of row[0, count) (elements).
template <class V, class E>
inline void prefetch_elements(const E* row, int count) {
  for (int d = 0; d < count; d += 64 / static_cast<int>(sizeof(E))) V::prefetch(row + d);
}

template <class V, int NK, class E>
inline void dot_keys(const float* qr, int nq, int hd, const E* const* kp, float* st, int64_t nqp) {
  int q = 0;
  for (; q + 4 <= nq; q += 4) dot_kernel<V, NK, 4>(qr + q * hd, hd, kp, st + q, nqp);
  for (; q + 2 <= nq; q += 2) dot_kernel<V, NK, 2>(qr + q * hd, hd, kp, st + q, nqp);
  for (; q < nq; ++q) dot_kernel<V, NK, 1>(qr + q * hd, hd, kp, st + q, nqp);
}

template <class V, class E>
inline void scores_dot(const float* qr, int nq, int hd, const E* const* kp, int64_t n, float* st, int64_t nqp,
                       const E* const* next_k, int64_t next_n) {
  constexpr int NK = V::kRegs >= 32 ? 2 : 1;
  int64_t j = 0;
  for (; j + NK <= n; j += NK) {
    for (int64_t u = j; u < std::min(j + NK, next_n); ++u) prefetch_elements<V>(next_k[u], hd);
    dot_keys<V, NK>(qr, nq, hd, kp + j, st + j * nqp, nqp);
  }
  for (; j < n; ++j) dot_keys<V, 1>(qr, nq, hd, kp + j, st + j * nqp, nqp);
  for (; j < next_n; ++j) prefetch_elements<V>(next_k[j], hd);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t q = nq; q < nqp; ++q) st[i * nqp + q] = 0.0f;
  }
}

// On the AVX-512 body, a decode task whose queries fill a vector evenly (2 to 16 of them; the 1.7B and 4B
// shapes have 4: 4 keys to a vector) keeps its scores packed, St[key][q] with stride nq. The L sums of
// NK keys x NQ queries leave the dot products as one vector (V::sum_lanes: one transposing reduction for
// all of them, where scores_dot reduces each sum alone and pads every key to a vector), and the softmax
// then works on full vectors. Each K vector feeds NQ FMAs and each query vector NK; L chains.
template <class V, int NK, int NQ, class E>
inline void dot_packed_kernel(const float* qr, int hd, const E* const* kp, float* st) {
  static_assert(NK * NQ == V::L);
  typename V::R acc[V::L];
  for (auto& a : acc) a = V::zero();
  for (int d = 0; d < hd; d += V::L) {
    typename V::R qv[NQ];
    for (int q = 0; q < NQ; ++q) qv[q] = V::load(qr + q * hd + d);
    for (int u = 0; u < NK; ++u) {
      const typename V::R k = load_folded<V>(kp[u] + d);
      for (int q = 0; q < NQ; ++q) acc[u * NQ + q] = V::fma(qv[q], k, acc[u * NQ + q]);
    }
  }
  V::store(st, V::sum_lanes(acc));
}

// Packed on the AVX-512 body only: on the AVX2 body (2 keys to a vector, 8 accumulators) it measured no
// faster than scores_dot, or slower (bench/RESULTS.md, session 24).
template <class V>
constexpr bool kPackedDecode = V::kRegs >= 32;

template <class V>
constexpr bool packs(int nq) {
  return kPackedDecode<V> && nq >= 2 && nq <= V::L && V::L % nq == 0;
}

// Scores of keys kp[0, n) packed (St[j * NQ + q]); the keys up to the next multiple of NK repeat the last
// row and score -inf. Asks for the next block's K rows as scores_dot does.
template <class V, int NQ, class E>
inline void scores_packed_n(const float* qr, int hd, const E** kp, int64_t n, float* st,
                            const E* const* next_k, int64_t next_n) {
  constexpr int NK = V::L / NQ;
  const int64_t nr = (n + NK - 1) / NK * NK;
  for (int64_t j = n; j < nr; ++j) kp[j] = kp[n - 1];
  int64_t j = 0;
  for (; j < nr; j += NK) {
    for (int64_t u = j; u < std::min(j + NK, next_n); ++u) prefetch_elements<V>(next_k[u], hd);
    dot_packed_kernel<V, NK, NQ>(qr, hd, kp + j, st + j * NQ);
  }
  for (; j < next_n; ++j) prefetch_elements<V>(next_k[j], hd);
  std::fill(st + n * NQ, st + nr * NQ, -std::numeric_limits<float>::infinity());
}

// The vectors of St a packed block of n keys fills.
template <class V>
inline int64_t packed_vectors(int nq, int64_t n) {
  const int64_t nk = V::L / nq;
  return (n + nk - 1) / nk;
}

template <class V, class E>
inline void scores_packed(const float* qr, int nq, int hd, const E** kp, int64_t n, float* st,
                          const E* const* next_k, int64_t next_n) {
  if constexpr (packs<V>(2)) {
    if (nq == 2) return scores_packed_n<V, 2>(qr, hd, kp, n, st, next_k, next_n);
  }
  if constexpr (packs<V>(4)) {
    if (nq == 4) return scores_packed_n<V, 4>(qr, hd, kp, n, st, next_k, next_n);
  }
  if constexpr (packs<V>(8)) {
    if (nq == 8) return scores_packed_n<V, 8>(qr, hd, kp, n, st, next_k, next_n);
  }
  if constexpr (packs<V>(16)) {
    if (nq == 16) return scores_packed_n<V, 16>(qr, hd, kp, n, st, next_k, next_n);
  }
}

// The online softmax step of a packed block (St: nv vectors, lane i holding query i % nq). Every per-query
// value (m, l, alpha) is kept repeated across the lanes, and the max and sum over the block fold the lanes
// of each query together (exact for the max; lanes 0 .. nq-1 are the ones read).
template <class V, class E>
inline void softmax_packed(float* st, int64_t nv, int nq, float* m, float* l, float* alpha) {
  const typename V::R m_old = V::load(m);
  typename V::R mb = m_old;
  for (int64_t v = 0; v < nv; ++v) mb = V::max(mb, V::load(st + v * V::L));
  for (int s = V::L / 2; s >= nq; s /= 2) mb = V::max(mb, V::rotate(mb, s));
  typename V::R sum = V::zero();
  for (int64_t v = 0; v < nv; ++v) {
    const typename V::R p = V::exp(V::sub(V::load(st + v * V::L), mb));
    V::store(st + v * V::L, fold_weights<V, E>(p));
    sum = V::add(sum, p);
  }
  for (int s = V::L / 2; s >= nq; s /= 2) sum = V::add(sum, V::rotate(sum, s));
  const typename V::R a = V::exp(V::sub(m_old, mb));
  V::store(alpha, a);
  V::store(m, mb);
  V::store(l, V::fma(V::load(l), a, sum));
}

// O[q][d0 .. d0 + DV*L) = O * alpha[q] + sum_j P[j][q] * V[j][voff..], for NQ queries at once. With key
// j, the same columns of row pf[j] (j < pf_n: the next block's V rows, decode) are asked for.
template <class V, int DV, int NQ, class E>
inline void values_kernel(float* o, int hd, const float* alpha, const float* st, int64_t nqp, int q0,
                          const E* const* vp, int64_t n, int d0, int voff, const E* const* pf, int64_t pf_n) {
  typename V::R acc[NQ][DV];
  for (int a = 0; a < NQ; ++a) {
    const typename V::R s = V::set1(alpha[q0 + a]);
    for (int v = 0; v < DV; ++v) acc[a][v] = V::mul(V::load(o + (q0 + a) * hd + d0 + v * V::L), s);
  }
  for (int64_t j = 0; j < n; ++j) {
    if (j < pf_n) prefetch_elements<V>(pf[j] + voff, DV * V::L);
    typename V::R x[DV];
    for (int v = 0; v < DV; ++v) x[v] = load_folded<V>(vp[j] + voff + v * V::L);
    for (int a = 0; a < NQ; ++a) {
      const typename V::R p = V::set1(st[j * nqp + q0 + a]);
      for (int v = 0; v < DV; ++v) acc[a][v] = V::fma(p, x[v], acc[a][v]);
    }
  }
  for (int a = 0; a < NQ; ++a) {
    for (int v = 0; v < DV; ++v) V::store(o + (q0 + a) * hd + d0 + v * V::L, acc[a][v]);
  }
}

// With 32 registers: 6 queries x 4 vectors of d (24 accumulators); with 16 and DV <= 2, 4 x DV; else
// 2 x DV; tails of 4, 2, 1 queries.
// Each output element is one chain (alpha scaling, then FMAs over keys in order) whatever the blocking.
// With `pack` (a tile of many queries, which passes over the block's V columns once per query group),
// each DV*L-wide column slice of the block is first copied into one contiguous buffer: cache rows are
// 2 KiB apart (every KV head of a position), so the same slice of 64 rows falls into a few L1 sets and
// would be evicted between the passes.
// The first query group's pass also asks for the next block's V columns (pf, pf_n; decode), so a decode
// step keeps its KV reads in flight through the values as through the scores.
template <class V, int DV, class E>
inline void values_queries(float* o, int hd, const float* alpha, const float* st, int64_t nqp, int nq,
                           const E* const* rows, int64_t n, int d0, int voff, const E* const* pf,
                           int64_t pf_n) {
  int q = 0;
  const auto next = [&] {  // only the first call asks
    const int64_t c = pf_n;
    pf_n = 0;
    return c;
  };
  if constexpr (V::kRegs >= 32 && DV <= 4) {
    for (; q + 6 <= nq; q += 6)
      values_kernel<V, DV, 6>(o, hd, alpha, st, nqp, q, rows, n, d0, voff, pf, next());
    for (; q + 4 <= nq; q += 4)
      values_kernel<V, DV, 4>(o, hd, alpha, st, nqp, q, rows, n, d0, voff, pf, next());
  }
  if constexpr (V::kRegs < 32 && DV <= 2) {  // 8 accumulators, 2 widened vectors, 1 broadcast
    for (; q + 4 <= nq; q += 4)
      values_kernel<V, DV, 4>(o, hd, alpha, st, nqp, q, rows, n, d0, voff, pf, next());
  }
  for (; q + 2 <= nq; q += 2)
    values_kernel<V, DV, 2>(o, hd, alpha, st, nqp, q, rows, n, d0, voff, pf, next());
  for (; q < nq; ++q) values_kernel<V, DV, 1>(o, hd, alpha, st, nqp, q, rows, n, d0, voff, pf, next());
}

template <class V, int DV, class E>
inline void values_all(float* o, int hd, const float* alpha, const float* st, int64_t nqp, int nq,
                       const E* const* vp, int64_t n, float* pack, const float** pack_rows,
                       const E* const* pf, int64_t pf_n) {
  constexpr int kW = DV * V::L;
  for (int d0 = 0; d0 < hd; d0 += kW) {
    if (pack != nullptr) {
      // The packed slice holds f32 (bf16 and fp8 rows are widened once here, not once per query group;
      // fp8 as value x 2^-8, load_folded).
      for (int64_t j = 0; j < n; ++j) {
        for (int v = 0; v < DV; ++v)
          V::store(pack + j * kW + v * V::L, load_folded<V>(vp[j] + d0 + v * V::L));
        pack_rows[j] = pack + j * kW;
      }
      values_queries<V, DV>(o, hd, alpha, st, nqp, nq, pack_rows, n, d0, 0,
                            static_cast<const float* const*>(nullptr), 0);
    } else {
      values_queries<V, DV>(o, hd, alpha, st, nqp, nq, vp, n, d0, d0, pf, pf_n);
    }
  }
}

template <class V, class E>
void run_item(const AttentionShape& sh, const AttentionTask& t, const Item& it, float* partials) {
  const int hd = sh.head_dim;
  const int group = sh.num_heads / sh.num_kv_heads;
  const int64_t rows = it.row_end - it.row_begin;
  const int nq = static_cast<int>(rows) * group;
  const int64_t nqp = (nq + V::L - 1) / V::L * V::L;
  const int64_t kv_off = static_cast<int64_t>(it.kv_head) * hd;

  thread_local std::vector<float> qt, qr, st, o, m, l, alpha;
  thread_local std::vector<const E*> kp, vp;
  thread_local std::vector<const float*> vrows;
  thread_local std::vector<float> vpack;
  if (t.rows > 1) qt.assign(static_cast<size_t>(hd * nqp), 0.0f);
  st.resize(static_cast<size_t>(kKb * nqp));
  o.assign(static_cast<size_t>(nq) * hd, 0.0f);
  // m starts at the lowest finite value, not -inf, so the first block's rescale is exp(-huge) = 0 and
  // a fully masked block (scores -inf) gives exp(-inf) = 0 with no special case.
  m.assign(static_cast<size_t>(nqp), -FLT_MAX);
  l.assign(static_cast<size_t>(nqp), 0.0f);
  alpha.resize(static_cast<size_t>(nqp));
  kp.resize(2 * kKb);  // this block's rows, then (decode) the next block's, prefetched meanwhile
  vp.resize(2 * kKb);
  if (t.rows > 1) {
    vpack.resize(static_cast<size_t>(kKb * hd));
    vrows.resize(kKb);
  }

  // Query q = r * group + g is head (kv_head * group + g) of row r. A one-row task keeps the queries as
  // rows (scores_dot), a larger one transposed.
  const bool dot_form = t.rows == 1;
  const bool packed = dot_form && packs<V>(nq);
  const int64_t sts = packed ? nq : nqp;  // St's stride between keys
  if (dot_form) qr.resize(static_cast<size_t>(nq) * hd);
  for (int64_t r = 0; r < rows; ++r) {
    for (int g = 0; g < group; ++g) {
      const float* q =
          t.q + (it.row_begin + r) * t.q_stride + (kv_off * group) + static_cast<int64_t>(g) * hd;
      const int64_t qi = r * group + g;
      for (int d = 0; d < hd; ++d) {
        if (dot_form) {
          qr[static_cast<size_t>(qi * hd + d)] = q[d] * sh.scale * kFp8Fold<E>;
        } else {
          qt[static_cast<size_t>(d * nqp + qi)] = q[d] * sh.scale;
        }
      }
    }
  }

  const int64_t first_pos = t.first_pos + it.row_begin, last_pos = t.first_pos + it.row_end - 1;
  const int64_t key_lo = std::max(row_lo(t, first_pos), it.key_from);
  const int64_t key_hi = std::min(last_pos, it.key_to);
  // Keys every row of the tile sees need no mask.
  const int64_t all_lo = row_lo(t, last_pos), all_hi = first_pos;
  size_t span = 0;
  // Rows of keys [ks, ke] into kd / vd; blocks are gathered in rising order.
  const auto gather = [&](int64_t ks, int64_t ke, const E** kd, const E** vd) {
    for (int64_t p = ks; p <= ke; ++p) {
      while (p >= t.kv[span].pos + t.kv[span].count) ++span;
      const KvSpan& s = t.kv[span];
      const int64_t off = (p - s.pos) * s.stride + it.kv_head * (s.head_stride != 0 ? s.head_stride : hd);
      kd[p - ks] = static_cast<const E*>(s.k) + off;
      vd[p - ks] = static_cast<const E*>(s.v) + off;
    }
  };
  const E** ck = kp.data();
  const E** cv = vp.data();
  const E** nk = kp.data() + kKb;
  const E** nv = vp.data() + kKb;
  const int64_t b0 = key_lo / kKb * kKb;
  float* pk = dot_form ? nullptr : vpack.data();
  const float** pk_rows = dot_form ? nullptr : vrows.data();
  for (int64_t b = b0; b <= key_hi; b += kKb) {
    const int64_t ks = std::max(b, key_lo), ke = std::min(b + kKb - 1, key_hi);
    const int64_t n = ke - ks + 1;
    if (!dot_form || b == b0) gather(ks, ke, ck, cv);
    int64_t next_n = 0;
    if (dot_form && b + kKb <= key_hi) {
      next_n = std::min(b + 2 * kKb - 1, key_hi) - (b + kKb) + 1;
      gather(b + kKb, b + kKb + next_n - 1, nk, nv);
    }
    for (int64_t c = 0; c < (dot_form ? 0 : nqp); c += 4 * V::L) {
      const int64_t left = (nqp - c) / V::L;
      float* stc = st.data() + c;
      const float* qtc = qt.data() + c;
      if (left >= 4) {
        scores_group<V, 4>(qtc, nqp, hd, ck, n, stc);
      } else if (left == 3) {
        scores_group<V, 3>(qtc, nqp, hd, ck, n, stc);
      } else if (left == 2) {
        scores_group<V, 2>(qtc, nqp, hd, ck, n, stc);
      } else {
        scores_group<V, 1>(qtc, nqp, hd, ck, n, stc);
      }
    }
    if (packed) {
      scores_packed<V>(qr.data(), nq, hd, ck, n, st.data(), nk, next_n);
    } else if (dot_form) {
      scores_dot<V>(qr.data(), nq, hd, ck, n, st.data(), nqp, nk, next_n);
    }
    if (ks < all_lo || ke > all_hi) {
      constexpr float kNegInf = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = ks + j;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t pos = first_pos + r;
          if (p >= row_lo(t, pos) && p <= pos) continue;
          std::fill_n(st.data() + j * sts + r * group, group, kNegInf);
        }
      }
    }
    if constexpr (kPackedDecode<V>) {
      if (packed)
        softmax_packed<V, E>(st.data(), packed_vectors<V>(nq, n), nq, m.data(), l.data(), alpha.data());
    }
    for (int64_t c = 0; c < (packed ? 0 : nqp); c += V::L) {
      const typename V::R m_old = V::load(m.data() + c);
      typename V::R mb = m_old;
      for (int64_t j = 0; j < n; ++j) mb = V::max(mb, V::load(st.data() + j * nqp + c));
      typename V::R sum = V::zero();
      for (int64_t j = 0; j < n; ++j) {
        const typename V::R p = V::exp(V::sub(V::load(st.data() + j * nqp + c), mb));
        V::store(st.data() + j * nqp + c, fold_weights<V, E>(p));
        sum = V::add(sum, p);
      }
      const typename V::R a = V::exp(V::sub(m_old, mb));
      V::store(alpha.data() + c, a);
      V::store(m.data() + c, mb);
      V::store(l.data() + c, V::fma(V::load(l.data() + c), a, sum));
    }
    if (V::kRegs >= 32 && (hd / V::L) % 4 == 0) {
      values_all<V, 4>(o.data(), hd, alpha.data(), st.data(), sts, nq, cv, n, pk, pk_rows, nv, next_n);
    } else if (V::kRegs < 32 && (!std::is_same_v<E, float> || !dot_form) && (hd / V::L) % 2 == 0) {
      // 16 registers: 4 queries x 2 vectors of d (values_queries, 11 live vectors), where 2 x 8 held 25
      // and widened each bf16 / fp8 V element twice for the 1.7B's 4 queries per KV head. A decode row on
      // f32 rows keeps 2 x 8 (2-3% faster there: its rows are only loaded); prefill tiles on f32 rows run
      // 4 x 2 over the packed slice (1.1-1.3x at 512 rows).
      values_all<V, 2>(o.data(), hd, alpha.data(), st.data(), sts, nq, cv, n, pk, pk_rows, nv, next_n);
    } else if ((hd / V::L) % 8 == 0) {
      values_all<V, 8>(o.data(), hd, alpha.data(), st.data(), sts, nq, cv, n, pk, pk_rows, nv, next_n);
    } else if ((hd / V::L) % 4 == 0) {
      values_all<V, 4>(o.data(), hd, alpha.data(), st.data(), sts, nq, cv, n, pk, pk_rows, nv, next_n);
    } else if ((hd / V::L) % 2 == 0) {
      values_all<V, 2>(o.data(), hd, alpha.data(), st.data(), sts, nq, cv, n, pk, pk_rows, nv, next_n);
    } else {
      values_all<V, 1>(o.data(), hd, alpha.data(), st.data(), sts, nq, cv, n, pk, pk_rows, nv, next_n);
    }
    if (dot_form) {
      std::swap(ck, nk);
      std::swap(cv, nv);
    }
  }

  if (it.part >= 0) {
    // A split part: its running max, sum and unnormalised output per query, merged by run().
    float* dst = partials + it.part * nq * (hd + 2);
    for (int qi = 0; qi < nq; ++qi) {
      dst[qi * (hd + 2)] = m[static_cast<size_t>(qi)];
      dst[qi * (hd + 2) + 1] = l[static_cast<size_t>(qi)];
      std::copy_n(o.data() + static_cast<int64_t>(qi) * hd, hd, dst + qi * (hd + 2) + 2);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int g = 0; g < group; ++g) {
      const int64_t qi = r * group + g;
      float* out = t.out + (it.row_begin + r) * t.out_stride + kv_off * group + static_cast<int64_t>(g) * hd;
      const typename V::R inv = V::set1(1.0f / l[static_cast<size_t>(qi)]);
      for (int d = 0; d < hd; d += V::L) V::store(out + d, V::mul(V::load(o.data() + qi * hd + d), inv));
    }
  }
}

template <class V>
void run(const AttentionShape& sh, std::span<const AttentionTask> tasks, ThreadPool& pool) {
  const int group = sh.num_heads / sh.num_kv_heads;
  const int hd = sh.head_dim;
  const int64_t tile_rows = std::max(1, kQueryVectors / group);
  struct Merge {
    int task, kv_head;
    int64_t first_part, parts;
  };
  thread_local std::vector<Item> items;
  thread_local std::vector<Merge> merges;
  thread_local std::vector<float> partials;
  items.clear();
  merges.clear();
  int64_t parts = 0;
  for (size_t ti = 0; ti < tasks.size(); ++ti) {
    const AttentionTask& t = tasks[ti];
    const int task = static_cast<int>(ti);
    const int64_t lo = row_lo(t, t.first_pos), pos = t.first_pos;
    if (t.rows == 1 && pos - lo + 1 > kSplitKeys) {
      // One item per part with every KV head, taken in turn on one thread (each thread then reads whole
      // rows of its own key range). With 512-key parts, 6-14% faster at 8k-32k keys than one item per
      // (1,024-key part, head), whose threads read alternate halves of the same rows (bench/RESULTS.md,
      // session 18).
      const int64_t first_b = lo / kSplitKeys * kSplitKeys;
      const int64_t n_parts = (pos - first_b) / kSplitKeys + 1;
      for (int h = 0; h < sh.num_kv_heads; ++h) merges.push_back({task, h, parts + h * n_parts, n_parts});
      for (int64_t b = first_b, pi = 0; b <= pos; b += kSplitKeys, ++pi) {
        const int64_t from = std::max(b, lo), to = std::min(b + kSplitKeys - 1, pos);
        items.push_back({task, 0, 0, 1, to - from + 1, from, to, parts + pi, sh.num_kv_heads, n_parts});
      }
      parts += sh.num_kv_heads * n_parts;
      continue;
    }
    for (int64_t r = 0; r < t.rows; r += tile_rows) {
      const int64_t re = std::min(t.rows, r + tile_rows);
      const int64_t keys = t.first_pos + re - row_lo(t, t.first_pos + r);
      for (int h = 0; h < sh.num_kv_heads; ++h) items.push_back({task, h, r, re, keys, 0, INT64_MAX, -1});
    }
  }
  partials.resize(static_cast<size_t>(parts * group * (hd + 2)));
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.keys > b.keys; });
  const std::vector<Item>& list = items;
  float* part_data = partials.data();
  pool.run(list.size(), [&](size_t i) {
    const AttentionTask& t = tasks[static_cast<size_t>(list[i].task)];
    for (int h = 0; h < list[i].heads; ++h) {
      Item it = list[i];
      it.kv_head += h;
      if (it.part >= 0) it.part += h * it.part_stride;
      if (t.kv_dtype == KvDtype::kBf16) {
        run_item<V, uint16_t>(sh, t, it, part_data);
      } else if (t.kv_dtype == KvDtype::kFp8) {
        run_item<V, uint8_t>(sh, t, it, part_data);
      } else {
        run_item<V, float>(sh, t, it, part_data);
      }
    }
  });
  if (merges.empty()) return;
  // Split rows: combine the parts in position order (the same order whatever ran where).
  const std::vector<Merge>& ml = merges;
  pool.run(ml.size(), [&](size_t i) {
    const Merge& mg = ml[i];
    const AttentionTask& t = tasks[static_cast<size_t>(mg.task)];
    for (int g = 0; g < group; ++g) {
      const auto part = [&](int64_t p) { return part_data + ((mg.first_part + p) * group + g) * (hd + 2); };
      float mx = part(0)[0];
      for (int64_t p = 1; p < mg.parts; ++p) mx = std::max(mx, part(p)[0]);
      float* out = t.out + static_cast<int64_t>(mg.kv_head * group + g) * hd;
      float sum = 0.0f;
      std::fill_n(out, hd, 0.0f);
      for (int64_t p = 0; p < mg.parts; ++p) {
        const float w = std::exp(part(p)[0] - mx);
        sum += part(p)[1] * w;
        for (int d = 0; d < hd; ++d) out[d] += part(p)[2 + d] * w;
      }
      const float inv = 1.0f / sum;
      for (int d = 0; d < hd; ++d) out[d] *= inv;
    }
  });
}

}  // namespace spark::kernels::attention_tile
