// AVX2 kernels of the integer formats (kInt8, kW4A8). A ymm holds 8 rows x 4 k of a block line, so a
// 64-byte line is two vectors (rows 0-7, rows 8-15). vpmaddubsw multiplies unsigned by signed bytes
// and adds adjacent pairs into s16 with saturation, which full-range int8 operands would hit
// (2 · 255 · 127 > 32767):
//  - kInt8 uses the sign trick: |x| (unsigned, <= 127) times w with x's sign moved onto it (vpsignb), so
//    each pair is at most 2 · 127 · 127 = 32258 and never saturates;
//  - kW4A8 puts the weight nibble (0..15) on the unsigned side: pairs are at most 2 · 15 · 127.
// vpmaddwd by ones widens the pairs to s32: kInt8's at once, kW4A8's after 8 of them are summed in s16
// (kS16Steps). On CPUs with AVX-VNNI (Alder Lake and later client cores, Sierra Forest, Zen 5) the same
// tiles use its vpdpbusd on ymm instead, as the AVX-512 tiles do: u8 x s8, four products summed into s32
// without saturation, one instruction per 32 products where the above takes four (kInt8) or 4.5 per 64
// (kW4A8):
//  - kInt8 feeds activations as q + 128 and subtracts 128 · Σ_k w[n, k] (the stored row sums);
//  - kW4A8 feeds the nibbles as the unsigned operand, as above.
// The f32 epilogues follow gemm_ref's order: results are bit-identical to it, with or without AVX-VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/unroll.h"
#include "gemm/gemm_isa.h"
#include "gemm/tile_driver.h"

namespace spark::kernels {

namespace {

inline __m256i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// acc + t (s32 lanes). Through asm: in a 4-row tile GCC 12 keeps a spare copy of each loop-carried
// accumulator (a move and a stack store per add) when the add is an intrinsic.
inline __m256i add32(__m256i acc, __m256i t) {
  __asm__("vpaddd %1, %0, %0" : "+x"(acc) : "x"(t));
  return acc;
}

// acc + t (s16 lanes, wrapping: the callers' sums cannot pass 32767). Through asm for the same reason.
inline __m256i add16(__m256i acc, __m256i t) {
  __asm__("vpaddw %1, %0, %0" : "+x"(acc) : "x"(t));
  return acc;
}

// W4A8 without AVX-VNNI: steps of 8 k whose vpmaddubsw pair sums gather in s16 before one vpmaddwd.
constexpr int64_t kS16Steps = 4;
static_assert((kGroupSize / 8) % kS16Steps == 0, "runs of s16 sums end at a group's end");
static_assert(2 * kS16Steps * 2 * 15 * 128 <= 32767, "a run's s16 sums cannot wrap (|activation| <= 128)");

// Decode tiles stream each weight block once. Without help one core keeps too few of those misses in
// flight (these GEMVs read at 35-52% of the measured bandwidth on an AMX Xeon), so each block's line is
// asked for this many 64-byte lines ahead, as the other GEMVs do (kDecodePrefetchLines, 16; here 32
// measured a little faster). Prefill tiles have at most kDecodeMaxM rows too, so they also ask; their lines
// are in L2.
constexpr int64_t kAvx2DecodePrefetchLines = 32;

// acc + Σ4 u8(a) · s8(b) per lane: AVX-VNNI's VEX-encoded vpdpbusd. Through asm, so this file is built
// without -mavxvnni and the compiler cannot put the instruction into the tiles of CPUs without it.
inline __m256i dpbusd_vex(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}

// Stores lanes [0, valid) of v (valid may be <= 0 or >= 8).
inline void store_lanes(float* dst, __m256 v, int64_t valid) {
  if (valid >= 8) {
    _mm256_storeu_ps(dst, v);
  } else if (valid > 0) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lanes), v);
  }
}

// Decode tiles stream several weight blocks at once: one stream per core left the reads short of the
// bandwidth. Four at one row (as the AVX-512 tiles), two at two rows; beyond that the accumulators
// outgrow the 16 ymm registers. kVnni: the AVX-VNNI products (activations offset by 128).
template <bool kVnni>
struct Int8Kernel {
  static constexpr int kDecodeNb = 4;
  static constexpr int64_t decode_nb(int64_t m) { return m == 1 ? 4 : m == 2 ? 2 : 1; }
  static constexpr int kPrefillMr = 4;
  static constexpr int kPrefillNb = 1;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    constexpr int NV = 2 * NB;  // ymm vectors per line
    const QuantizedWeight& w = c.w;
    const int64_t bs = tile_block_stride<MR>(c);
    const int64_t block_bytes = w.k_pad * kBlockRows;
    const auto* wq = static_cast<const int8_t*>(w.qweight) + b0 * block_bytes;
    const int8_t* xq = c.a->q + m0 * c.a->k_pad;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[MR][NV];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_si256();
    }
    for (int64_t kq = 0; kq < w.k_pad / 4; ++kq) {
      if constexpr (MR <= kDecodeMaxM) {
        SPARK_UNROLL
        for (int b = 0; b < NB; ++b)
          prefetch_line(wq + b * bs * block_bytes + (kq + kAvx2DecodePrefetchLines) * 64);
      }
      __m256i wv[NV];
      SPARK_UNROLL
      for (int v = 0; v < NV; ++v) {
        wv[v] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(wq + (v / 2) * bs * block_bytes + kq * 64 + (v % 2) * 32));
      }
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m256i xv = broadcast4(xq + i * c.a->k_pad + kq * 4);
        if constexpr (kVnni) {
          SPARK_UNROLL
          for (int v = 0; v < NV; ++v) acc[i][v] = dpbusd_vex(acc[i][v], xv, wv[v]);
        } else {
          const __m256i ax = _mm256_abs_epi8(xv);
          SPARK_UNROLL
          for (int v = 0; v < NV; ++v) {
            const __m256i pairs = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[v], xv));
            acc[i][v] = add32(acc[i][v], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    }
    const auto* scales = static_cast<const float*>(w.scales);
    SPARK_UNROLL
    for (int v = 0; v < NV; ++v) {
      const int64_t n0 = (b0 + (v / 2) * bs) * kBlockRows + (v % 2) * 8;
      const __m256 sv = _mm256_loadu_ps(scales + n0);
      // Rows past N (padding) have row sums of 0, like their weights.
      const __m256i comp =
          kVnni ? _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.row_sums + n0)), 7)
                : _mm256_setzero_si256();
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[i][v], comp)), sv);
        r = _mm256_mul_ps(r, _mm256_set1_ps(c.a->scale[m0 + i]));
        store_lanes(c.y + (m0 + i) * c.ldy + n0, r, w.n - n0);
      }
    }
  }
};

template <bool kVnni>
struct W4A8Kernel {
  static constexpr int kDecodeNb = 4;
  // Four blocks at one row only: their group sums stay in registers, the running f32 sums live in L1.
  static constexpr int64_t decode_nb(int64_t m) { return m == 1 ? 4 : 1; }
  static constexpr int kPrefillMr = 4;
  static constexpr int kPrefillNb = 1;

  template <int MR, int NB>
  static void tile(const TileContext& c, int64_t m0, int64_t b0) {
    constexpr int NV = 2 * NB;
    const QuantizedWeight& w = c.w;
    const int64_t groups = w.groups();
    const int64_t bs = tile_block_stride<MR>(c);
    const int64_t block_bytes = w.k_pad * kBlockRows / 2;
    const auto* wq = static_cast<const uint8_t*>(w.qweight) + b0 * block_bytes;
    const auto* sc = static_cast<const uint16_t*>(w.scales) + b0 * groups * kBlockRows;
    const int8_t* xq = c.a->q + m0 * c.a->k_pad;
    const int32_t* gsum = c.a->group_sums + m0 * groups;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 facc[MR][NV];
    SPARK_UNROLL
    for (int i = 0; i < MR; ++i) {
      SPARK_UNROLL
      for (int v = 0; v < NV; ++v) facc[i][v] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < groups; ++g) {
      // Σ q·x of this group per row and lane, in s32. Without AVX-VNNI they wait in L1 between the s16
      // runs below (16 registers hold those runs' sums, not both).
      alignas(32) int32_t acc[MR][NV][8] = {};
      // Without AVX-VNNI each lane's pair sums (at most 2 · 15 · 127 = 3810 each) gather in s16 over runs
      // of kS16Steps steps of 8 k, 2 · kS16Steps of them (30480 < 32767: exact), before one vpmaddwd widens
      // them: per 64 products 2 vpmaddubsw + 2 vpaddw + 1/2 of a vpmaddwd + vpaddd, where widening every
      // step took 2 + 1 + 1 + 1. With AVX-VNNI vpdpbusd sums into s32: one run of the whole group.
      constexpr int64_t kRun = kVnni ? kGroupSize / 8 : kS16Steps;
      for (int64_t p0 = 0; p0 < kGroupSize / 8; p0 += kRun) {
        __m256i run[MR][NV];
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          SPARK_UNROLL
          for (int v = 0; v < NV; ++v) run[i][v] = _mm256_setzero_si256();
        }
        for (int64_t p = p0; p < p0 + kRun; ++p) {
          if constexpr (MR <= kDecodeMaxM) {
            SPARK_UNROLL
            for (int b = 0; b < NB; ++b)
              prefetch_line(wq + b * bs * block_bytes +
                            (g * (kGroupSize / 8) + p + kAvx2DecodePrefetchLines) * 64);
          }
          __m256i lo[NV], hi[NV];
          SPARK_UNROLL
          for (int v = 0; v < NV; ++v) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                wq + (v / 2) * bs * block_bytes + (g * (kGroupSize / 8) + p) * 64 + (v % 2) * 32));
            lo[v] = _mm256_and_si256(raw, low4);
            hi[v] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
          }
          SPARK_UNROLL
          for (int i = 0; i < MR; ++i) {
            const int8_t* xp = xq + i * c.a->k_pad + g * kGroupSize + p * 8;
            const __m256i x0 = broadcast4(xp), x1 = broadcast4(xp + 4);
            SPARK_UNROLL
            for (int v = 0; v < NV; ++v) {
              if constexpr (kVnni) {
                run[i][v] = dpbusd_vex(dpbusd_vex(run[i][v], lo[v], x0), hi[v], x1);
              } else {
                run[i][v] = add16(run[i][v], _mm256_maddubs_epi16(lo[v], x0));
                run[i][v] = add16(run[i][v], _mm256_maddubs_epi16(hi[v], x1));
              }
            }
          }
        }
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          SPARK_UNROLL
          for (int v = 0; v < NV; ++v) {
            auto* a = reinterpret_cast<__m256i*>(acc[i][v]);
            const __m256i sums = kVnni ? run[i][v] : _mm256_madd_epi16(run[i][v], ones);
            _mm256_store_si256(a, _mm256_add_epi32(_mm256_load_si256(a), sums));
          }
        }
      }
      SPARK_UNROLL
      for (int v = 0; v < NV; ++v) {
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(sc + ((v / 2) * bs * groups + g) * kBlockRows + (v % 2) * 8)));
        SPARK_UNROLL
        for (int i = 0; i < MR; ++i) {
          const __m256i corr =
              _mm256_sub_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(acc[i][v])),
                               _mm256_set1_epi32(8 * gsum[i * groups + g]));
          facc[i][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), s, facc[i][v]);
        }
      }
    }
    SPARK_UNROLL
    for (int v = 0; v < NV; ++v) {
      const int64_t n0 = (b0 + (v / 2) * bs) * kBlockRows + (v % 2) * 8;
      SPARK_UNROLL
      for (int i = 0; i < MR; ++i) {
        store_lanes(c.y + (m0 + i) * c.ldy + n0,
                    _mm256_mul_ps(facc[i][v], _mm256_set1_ps(c.a->scale[m0 + i])), w.n - n0);
      }
    }
  }
};

}  // namespace

// quantize_row (activations.cpp) 8 lanes at a time, with the same result bit for bit (see
// quantize_row_avx512). The scalar one calls nearbyintf per activation: ~17 us a decode GEMV of
// K = 2,048, on the one thread that runs it, before the tiles start (bench/RESULTS.md, session 27).
void quantize_row_avx2(const float* x, int64_t k, int64_t k_pad, int64_t groups, bool offset128, int8_t* q,
                       float* scale, int32_t* group_sums) {
  // Lanes [0, n) of x + i, zeros beyond (a zero changes neither max|x| nor a group sum).
  const auto load = [&](int64_t i) {
    const int64_t n = k - i;
    if (n >= 8) return _mm256_loadu_ps(x + i);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(x + i, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane));
  };
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 vmax = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; i += 8) vmax = _mm256_max_ps(_mm256_andnot_ps(sign, load(i)), vmax);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m128i bias = _mm_set1_epi8(offset128 ? static_cast<char>(0x80) : 0);
  for (int64_t g = 0; g * 128 < k || g < groups; ++g) {
    __m256i sum = _mm256_setzero_si256();
    for (int64_t i = g * 128; i < std::min(k, (g + 1) * 128); i += 8) {
      const __m256 r =
          _mm256_round_ps(_mm256_mul_ps(load(i), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      // vmaxps / vminps return their second operand for a NaN, as fmax / fmin do.
      const __m256i qi = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
      sum = _mm256_add_epi32(sum, qi);
      // 8 values in [-127, 127] to bytes: the packs keep each 128-bit half's 4 in its first dword.
      const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(qi, qi), _mm256_setzero_si256());
      const __m128i q8 =
          _mm_xor_si128(_mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)), bias);
      alignas(16) int8_t bytes[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(bytes), q8);
      std::memcpy(q + i, bytes, static_cast<size_t>(std::min<int64_t>(8, k - i)));
    }
    if (g < groups) {
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      group_sums[g] = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1)));
    }
  }
  std::memset(q + k, offset128 ? 0x80 : 0, static_cast<size_t>(k_pad - k));
}

void gemm_int8_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                    ThreadPool& pool) {
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/false, &pool, 1, quantize_row_avx2);
  run_tiles<Int8Kernel<false>>(TileContext{w, &a, x, w.k, nullptr, y, ldy, {}}, m, pool);
}

void gemm_int8_avxvnni(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool) {
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, 0, /*offset128=*/true, &pool, 1, quantize_row_avx2);
  run_tiles<Int8Kernel<true>>(TileContext{w, &a, x, w.k, nullptr, y, ldy, {}}, m, pool);
}

void gemm_w4a8_avx2(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                    ThreadPool& pool) {
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, w.groups(), /*offset128=*/false, &pool, 1, quantize_row_avx2);
  run_tiles<W4A8Kernel<false>>(TileContext{w, &a, x, w.k, nullptr, y, ldy, {}}, m, pool);
}

void gemm_w4a8_avxvnni(const float* x, int64_t m, const QuantizedWeight& w, float* y, int64_t ldy,
                       ThreadPool& pool) {
  const QuantizedActivations a =
      quantize_activations(x, m, w.k, w.k_pad, w.groups(), /*offset128=*/false, &pool, 1, quantize_row_avx2);
  run_tiles<W4A8Kernel<true>>(TileContext{w, &a, x, w.k, nullptr, y, ldy, {}}, m, pool);
}

}  // namespace spark::kernels
