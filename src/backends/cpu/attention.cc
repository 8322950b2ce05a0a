// CPU causal GQA attention over paged K/V (f32, bf16 or f16 cache, or MLX affine int8/int4 codes
// with bf16 scales and biases), flash-style online softmax.
//
// One task per (block of up to 8 consecutive queries of a row, kv head): the queries and the q
// heads sharing that kv head (GQA) walk the keys together, so each K/V row is widened to f32 once
// per task rather than once per query and head. Keys are visited in chunks aligned to absolute
// positions (multiples of kChunk), so the operations that produce a query's output depend only on
// its own position, window and keys — not on the other rows or queries in the step, the query
// block or prefill chunk it belongs to, or the thread split (batch invariance).
//
// With a window and attention sinks, a query's keys are two ranges ([0, sinks) and its window),
// visited sinks first; the ranges are computed per query, so the inner loops stay branch-free.
//
// Per chunk: s_j = (q·k_j) · scale (softcapped: cap · tanh(s / cap)); m' = max(m, max_j s_j);
// acc and l are rescaled by exp(m − m'); p_j = exp(s_j − m'); l += p_j; acc += p_j · v_j.
// Finally out = acc / l. All in f32; dot products run over head_dim zero-padded to whole vectors.
//
// Affine K/V are dequantized (scale·code + bias, f32) key row by key row into the same per-chunk
// f32 buffers the dense rows are widened into: the cache is never materialized densely, and a
// key's f32 values depend only on its own codes, so batch invariance holds as for dense K/V.
//
// TurboQuant K/V (kv/turbo_codec.h) are decoded the same way, keys to (code + zero)·scale and
// values to their *rotated* reconstruction centroid[code]·scale: attention is linear in V, so the
// accumulator holds the rotated output, which is un-rotated (signs ⊙ H(o)/√d) once per query
// head at the end instead of once per key (deferred inverse rotation).
//
// Both decode with SIMD (backends/cpu/kv_decode-inl.h), 8 codes per step, to exactly the codec's
// values.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/attention.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>

#include "backends/cpu/kv_decode-inl.h"
#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/scalar.h"
#include "core/thread_pool.h"
#include "kv/turbo_codec.h"

#ifndef RINGLM_BACKENDS_CPU_ATTENTION_SHARED_
#define RINGLM_BACKENDS_CPU_ATTENTION_SHARED_
namespace ringlm::cpu {
// Up to kQueryBlock consecutive queries of one row against one kv head.
constexpr int64_t kQueryBlock = 8;
struct AttentionTask {
  int32_t row;
  int32_t kv_head;
  int64_t t0, t1;  // query tokens [t0, t1)
};

struct AttentionArgs {
  const float* q;  // [T, q_heads, D]
  float* out;      // [T, q_heads, D]
  const void* k;   // dense: [num_blocks, block_tokens, kv_heads, D] in `kv_dtype`
  const void* v;   // affine: U32 codes [num_blocks, block_tokens, kv_heads, D·bits/32]
  DType kv_dtype;
  // Affine views only: BF16[num_blocks, block_tokens, kv_heads, D/group_size]
  const bf16_t *k_scales, *k_biases, *v_scales, *v_biases;
  int bits;        // 0: dense; affine: code bits; turbo: key bits
  int value_bits;  // turbo: value bits (its scale planes hold f16); 0 otherwise
  size_t group_size;
  size_t q_heads, kv_heads, D, block_tokens;
  const ops::AttentionRows* rows;
  const AttentionTask* tasks;
  float scale, softcap;
  int64_t window, sinks;
};
}  // namespace ringlm::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

constexpr size_t kChunk = 32;  // keys per online-softmax step; a multiple of every lane count

// Scratch for one task, reused across the tasks a thread runs. Per (query, head) "stream":
// its query vector, output accumulator, running max m and running sum l.
struct Scratch {
  size_t Dp = 0;
  hwy::AlignedFreeUniquePtr<float[]> q, acc, keys, vals, scores;
  std::vector<float> m, l;
  void Init(size_t dp, size_t streams) {
    Dp = dp;
    q = hwy::AllocateAligned<float>(streams * dp);
    acc = hwy::AllocateAligned<float>(streams * dp);
    keys = hwy::AllocateAligned<float>(kChunk * dp);
    vals = hwy::AllocateAligned<float>(kChunk * dp);
    scores = hwy::AllocateAligned<float>(kChunk);
    std::fill(keys.get(), keys.get() + kChunk * dp, 0.0f);  // padding stays 0
    std::fill(vals.get(), vals.get() + kChunk * dp, 0.0f);
    std::fill(q.get(), q.get() + streams * dp, 0.0f);
    m.resize(streams);
    l.resize(streams);
  }
};

// dst[0, n) = src[0, n) widened to f32 (exact).
template <typename KV>
HWY_INLINE void WidenRow(DF df, const KV* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT dst) {
  const size_t L = hn::Lanes(df);
  size_t d = 0;
  for (; d + L <= n; d += L) hn::StoreU(LoadF32(df, src + d), df, dst + d);
  for (; d < n; ++d) dst[d] = to_f32(src[d]);
}

// K/V row (slot, kv head) of a dense cache, widened to f32.
template <typename KV>
struct DenseRows {
  const KV* k;
  const KV* v;
  size_t kv_heads, D;
  HWY_INLINE void Load(DF df, size_t slot, size_t g, float* HWY_RESTRICT dk,
                       float* HWY_RESTRICT dv) const {
    const size_t off = (slot * kv_heads + g) * D;
    WidenRow(df, k + off, D, dk);
    WidenRow(df, v + off, D, dv);
  }
  HWY_INLINE void Prefetch(size_t slot, size_t g) const {
    const size_t off = (slot * kv_heads + g) * D;
    for (size_t b = 0; b < D * sizeof(KV); b += 64) {
      hwy::Prefetch(reinterpret_cast<const char*>(k + off) + b);
      hwy::Prefetch(reinterpret_cast<const char*>(v + off) + b);
    }
  }
};

// K/V row (slot, kv head) of an affine cache, dequantized to f32.
template <int kBits>
struct AffineRows {
  const uint32_t* k;
  const uint32_t* v;
  const bf16_t *k_scales, *k_biases, *v_scales, *v_biases;
  size_t kv_heads, D, group;
  HWY_INLINE void Load(DF, size_t slot, size_t g, float* HWY_RESTRICT dk,
                       float* HWY_RESTRICT dv) const {
    const size_t row = slot * kv_heads + g, words = D * kBits / 32, groups = D / group;
    DecodeAffineRow<kBits>(k + row * words, k_scales + row * groups, k_biases + row * groups, D,
                           group, dk);
    DecodeAffineRow<kBits>(v + row * words, v_scales + row * groups, v_biases + row * groups, D,
                           group, dv);
  }
  HWY_INLINE void Prefetch(size_t slot, size_t g) const {
    const size_t row = slot * kv_heads + g, words = D * kBits / 32;
    for (size_t b = 0; b < words * 4; b += 64) {
      hwy::Prefetch(reinterpret_cast<const char*>(k + row * words) + b);
      hwy::Prefetch(reinterpret_cast<const char*>(v + row * words) + b);
    }
    hwy::Prefetch(k_scales + row * (D / group));
    hwy::Prefetch(v_scales + row * (D / group));
  }
};

// K row and rotated V row (slot, kv head) of a TurboQuant cache, decoded to f32.
struct TurboRows {
  const uint8_t* k;
  const uint8_t* v;
  const f16_t *k_scales, *k_zeros, *v_scales;
  const float* centroids;  // F32[256]: the value codebook, zero-padded (whole-vector reads)
  size_t kv_heads, D;
  int key_bits, value_bits;
  HWY_INLINE void Load(DF, size_t slot, size_t g, float* HWY_RESTRICT dk,
                       float* HWY_RESTRICT dv) const {
    const size_t row = slot * kv_heads + g, groups = D / kv::kTurboGroup;
    WithTurboBits(key_bits, [&](auto bits) {
      constexpr int kBits = decltype(bits)::value;
      DecodeTurboKeyRow<kBits>(k + row * D * kBits / 8, k_scales + row * groups,
                               k_zeros + row * groups, D, dk);
    });
    WithTurboBits(value_bits, [&](auto bits) {
      constexpr int kBits = decltype(bits)::value;
      DecodeTurboValueRow<kBits>(v + row * D * kBits / 8, v_scales + row * groups, centroids, D,
                                 dv);
    });
  }
  HWY_INLINE void Prefetch(size_t slot, size_t g) const {
    const size_t row = slot * kv_heads + g;
    const size_t kb = D * static_cast<size_t>(key_bits) / 8;
    const size_t vb = D * static_cast<size_t>(value_bits) / 8;
    for (size_t b = 0; b < kb; b += 64) hwy::Prefetch(k + row * kb + b);
    for (size_t b = 0; b < vb; b += 64) hwy::Prefetch(v + row * vb + b);
    hwy::Prefetch(k_scales + row * (D / kv::kTurboGroup));
    hwy::Prefetch(k_zeros + row * (D / kv::kTurboGroup));
    hwy::Prefetch(v_scales + row * (D / kv::kTurboGroup));
  }
};

// One online-softmax step of stream `st` over the widened keys [jb, je) of the current chunk
// (indices relative to the chunk start). What it computes depends only on the stream's state
// and those keys, so a query gives the same bits however it is grouped with others.
void ChunkStep(const AttentionArgs& a, Scratch& s, size_t st, size_t jb, size_t je) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t Dp = s.Dp;
  float* sc = s.scores.get();
  const float* q = s.q.get() + st * Dp;
  const float* keys = s.keys.get();
  for (size_t j = 0; j < kChunk; ++j) sc[j] = 0.0f;
  // q·k_j: one accumulator per key; four keys at a time for independent FMA chains.
  size_t jk = jb;
  for (; jk + 4 <= je; jk += 4) {
    auto d0 = hn::Zero(df), d1 = hn::Zero(df), d2 = hn::Zero(df), d3 = hn::Zero(df);
    for (size_t d = 0; d < Dp; d += L) {
      const auto qv = hn::Load(df, q + d);
      d0 = hn::MulAdd(qv, hn::Load(df, keys + jk * Dp + d), d0);
      d1 = hn::MulAdd(qv, hn::Load(df, keys + (jk + 1) * Dp + d), d1);
      d2 = hn::MulAdd(qv, hn::Load(df, keys + (jk + 2) * Dp + d), d2);
      d3 = hn::MulAdd(qv, hn::Load(df, keys + (jk + 3) * Dp + d), d3);
    }
    sc[jk] = ReduceSumF32(df, d0);
    sc[jk + 1] = ReduceSumF32(df, d1);
    sc[jk + 2] = ReduceSumF32(df, d2);
    sc[jk + 3] = ReduceSumF32(df, d3);
  }
  for (; jk < je; ++jk) {
    auto dot = hn::Zero(df);
    for (size_t d = 0; d < Dp; d += L)
      dot = hn::MulAdd(hn::Load(df, q + d), hn::Load(df, keys + jk * Dp + d), dot);
    sc[jk] = ReduceSumF32(df, dot);
  }
  // Scale (and soft-cap) the whole chunk at once; unused slots hold 0 and are ignored.
  const auto vscale = hn::Set(df, a.scale);
  const auto vcap = hn::Set(df, a.softcap);
  for (size_t j = 0; j < kChunk; j += L) {
    auto v = hn::Mul(hn::Load(df, sc + j), vscale);
    if (a.softcap > 0.0f) v = hn::Mul(vcap, hn::Tanh(df, hn::Div(v, vcap)));
    hn::Store(v, df, sc + j);
  }
  float chunk_max = -std::numeric_limits<float>::infinity();
  for (size_t j = jb; j < je; ++j) chunk_max = std::max(chunk_max, sc[j]);
  const float m_old = s.m[st];
  const float m_new = std::max(m_old, chunk_max);
  float* acc = s.acc.get() + st * Dp;
  if (m_new > m_old && s.l[st] > 0.0f) {  // rescale what was accumulated under the old max
    const float corr = std::exp(m_old - m_new);
    s.l[st] *= corr;
    const auto vc = hn::Set(df, corr);
    for (size_t d = 0; d < Dp; d += L) hn::Store(hn::Mul(hn::Load(df, acc + d), vc), df, acc + d);
  }
  s.m[st] = m_new;
  const auto vm = hn::Set(df, m_new);
  for (size_t j = 0; j < kChunk; j += L) {
    hn::Store(hn::Exp(df, hn::Min(hn::Sub(hn::Load(df, sc + j), vm), hn::Zero(df))), df, sc + j);
  }
  float l = s.l[st];
  for (size_t j = jb; j < je; ++j) l += sc[j];
  s.l[st] = l;
  // acc[d] += p_j · v_j[d] over the keys in order, four vectors of d held in registers.
  const float* vals = s.vals.get();
  size_t d = 0;
  for (; d + 4 * L <= Dp; d += 4 * L) {
    auto a0 = hn::Load(df, acc + d), a1 = hn::Load(df, acc + d + L);
    auto a2 = hn::Load(df, acc + d + 2 * L), a3 = hn::Load(df, acc + d + 3 * L);
    for (size_t j = jb; j < je; ++j) {
      const auto vp = hn::Set(df, sc[j]);
      const float* vd = vals + j * Dp + d;
      a0 = hn::MulAdd(vp, hn::Load(df, vd), a0);
      a1 = hn::MulAdd(vp, hn::Load(df, vd + L), a1);
      a2 = hn::MulAdd(vp, hn::Load(df, vd + 2 * L), a2);
      a3 = hn::MulAdd(vp, hn::Load(df, vd + 3 * L), a3);
    }
    hn::Store(a0, df, acc + d);
    hn::Store(a1, df, acc + d + L);
    hn::Store(a2, df, acc + d + 2 * L);
    hn::Store(a3, df, acc + d + 3 * L);
  }
  for (; d < Dp; d += L) {
    auto a0 = hn::Load(df, acc + d);
    for (size_t j = jb; j < je; ++j)
      a0 = hn::MulAdd(hn::Set(df, sc[j]), hn::Load(df, vals + j * Dp + d), a0);
    hn::Store(a0, df, acc + d);
  }
}

// Queries [t0, t1) of row r (consecutive positions) against kv head g. Chunks are widened once
// and shared by every query that needs them. `kv` reads one key's K and V rows as f32.
template <typename KvRows>
void Task(const AttentionArgs& a, const KvRows& kv, Scratch& s, const AttentionTask& task) {
  const DF df;
  const size_t D = a.D, Dp = s.Dp, group = a.q_heads / a.kv_heads;
  const ops::AttentionRows& rows = *a.rows;
  const int32_t r = task.row;
  const size_t g = task.kv_head;
  const int64_t n = rows.query_start[r + 1] - rows.query_start[r];
  const int64_t pos0 = rows.context_len[r] - n + (task.t0 - rows.query_start[r]);
  const int64_t nq = task.t1 - task.t0;
  // The query at `pos` sees the keys [0, sink_end) and [lo, pos]. When the sinks reach the
  // window the two ranges merge into [0, pos]. Both bounds are non-decreasing in pos.
  const auto lo_of = [&](int64_t pos) {
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : int64_t{0};
    return lo <= a.sinks ? int64_t{0} : lo;
  };
  const auto sink_end_of = [&](int64_t pos) { return lo_of(pos) > 0 ? a.sinks : int64_t{0}; };
  const int32_t* table =
      rows.block_table + static_cast<size_t>(r) * static_cast<size_t>(rows.max_blocks);
  // Slot of key j.
  const auto slot_of = [&](int64_t j) {
    const auto bt = static_cast<int64_t>(a.block_tokens);
    return static_cast<size_t>(table[j / bt]) * a.block_tokens + static_cast<size_t>(j % bt);
  };

  for (int64_t i = 0; i < nq; ++i) {
    for (size_t h = 0; h < group; ++h) {
      const size_t st = static_cast<size_t>(i) * group + h;
      const float* qh = a.q + ((static_cast<size_t>(task.t0 + i)) * a.q_heads + g * group + h) * D;
      std::copy(qh, qh + D, s.q.get() + st * Dp);
      std::fill(s.acc.get() + st * Dp, s.acc.get() + (st + 1) * Dp, 0.0f);
      s.m[st] = -std::numeric_limits<float>::infinity();
      s.l[st] = 0.0f;
    }
  }

  const auto C = static_cast<int64_t>(kChunk);
  const int64_t first = lo_of(pos0), last = pos0 + nq - 1;  // keys any query needs
  // Attention sinks first: chunks of [0, sinks) for the queries whose window left them behind.
  for (int64_t c0 = 0; c0 < sink_end_of(last); c0 += C) {
    const int64_t we = std::min(c0 + C, a.sinks);
    for (int64_t j = c0; j < we; ++j) {
      kv.Load(df, slot_of(j), g, s.keys.get() + static_cast<size_t>(j - c0) * Dp,
              s.vals.get() + static_cast<size_t>(j - c0) * Dp);
    }
    for (int64_t i = 0; i < nq; ++i) {
      if (sink_end_of(pos0 + i) == 0) continue;
      for (size_t h = 0; h < group; ++h) {
        ChunkStep(a, s, static_cast<size_t>(i) * group + h, 0, static_cast<size_t>(we - c0));
      }
    }
  }
  for (int64_t c0 = first - first % C; c0 <= last; c0 += C) {
    // Start fetching the next chunk's rows: keys are scattered over blocks, so the hardware
    // prefetchers do not see them coming and the loads below would wait on memory one by one.
    for (int64_t j = c0 + C; j < std::min(c0 + 2 * C, last + 1); ++j) kv.Prefetch(slot_of(j), g);
    // Widen the chunk's K and V rows that some query needs into [kChunk, Dp] f32.
    const int64_t wb = std::max(c0, first), we = std::min(c0 + C, last + 1);
    for (int64_t j = wb; j < we; ++j) {
      kv.Load(df, slot_of(j), g, s.keys.get() + static_cast<size_t>(j - c0) * Dp,
              s.vals.get() + static_cast<size_t>(j - c0) * Dp);
    }
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t pos = pos0 + i;
      const int64_t j0 = std::max(c0, lo_of(pos)), j1 = std::min(c0 + C, pos + 1);
      if (j0 >= j1) continue;
      for (size_t h = 0; h < group; ++h) {
        ChunkStep(a, s, static_cast<size_t>(i) * group + h, static_cast<size_t>(j0 - c0),
                  static_cast<size_t>(j1 - c0));
      }
    }
  }

  for (int64_t i = 0; i < nq; ++i) {
    for (size_t h = 0; h < group; ++h) {
      const size_t st = static_cast<size_t>(i) * group + h;
      float* o = a.out + ((static_cast<size_t>(task.t0 + i)) * a.q_heads + g * group + h) * D;
      const float* acc = s.acc.get() + st * Dp;
      const float l = s.l[st];
      for (size_t d = 0; d < D; ++d) o[d] = acc[d] / l;
      if (a.value_bits > 0) kv::turbo_unrotate(o, static_cast<int>(D), o);  // deferred rotation
    }
  }
}

void AttentionTasksImpl(const AttentionArgs& a, size_t begin, size_t end) {
  const size_t L = hn::Lanes(DF());
  Scratch s;
  s.Init((a.D + L - 1) / L * L, kQueryBlock * (a.q_heads / a.kv_heads));
  const auto dense = [&](auto* type) {
    using KV = std::remove_cv_t<std::remove_pointer_t<decltype(type)>>;
    const DenseRows<KV> kv{static_cast<const KV*>(a.k), static_cast<const KV*>(a.v), a.kv_heads,
                           a.D};
    for (size_t i = begin; i < end; ++i) Task(a, kv, s, a.tasks[i]);
  };
  const auto affine = [&](auto bits) {
    const AffineRows<decltype(bits)::value> kv{static_cast<const uint32_t*>(a.k),
                                               static_cast<const uint32_t*>(a.v),
                                               a.k_scales,
                                               a.k_biases,
                                               a.v_scales,
                                               a.v_biases,
                                               a.kv_heads,
                                               a.D,
                                               a.group_size};
    for (size_t i = begin; i < end; ++i) Task(a, kv, s, a.tasks[i]);
  };
  if (a.value_bits > 0) {
    HWY_ALIGN float centroids[256] = {};
    const std::vector<float>& codebook = kv::lloyd_max_centroids(a.value_bits);
    std::copy(codebook.begin(), codebook.end(), centroids);
    const TurboRows kv{static_cast<const uint8_t*>(a.k),
                       static_cast<const uint8_t*>(a.v),
                       a.k_scales,
                       a.k_biases,
                       a.v_scales,
                       centroids,
                       a.kv_heads,
                       a.D,
                       a.bits,
                       a.value_bits};
    for (size_t i = begin; i < end; ++i) Task(a, kv, s, a.tasks[i]);
    return;
  }
  if (a.bits == 8) return affine(std::integral_constant<int, 8>{});
  if (a.bits == 4) return affine(std::integral_constant<int, 4>{});
  switch (a.kv_dtype) {
    case DType::F32:
      return dense(static_cast<const float*>(nullptr));
    case DType::BF16:
      return dense(static_cast<const hwy::bfloat16_t*>(nullptr));
    case DType::F16:
      return dense(static_cast<const hwy::float16_t*>(nullptr));
    default:
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(AttentionTasksImpl);

void attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& rows,
               const ops::AttentionParams& params, Tensor& out) {
  const int kv_heads = kv.kv_heads();
  // The SIMD decoders are instantiated per width; an unknown width must not reach them.
  if (kv.value_bits > 0) kv::validate_turbo(kv.bits, kv.value_bits, kv.head_dim());
  // Tasks: each row's queries in blocks of kQueryBlock, times the kv heads.
  std::vector<AttentionTask> tasks;
  for (int32_t r = 0; r < rows.num_rows; ++r) {
    // Only queries at positions in [query_pos_begin, query_pos_end): token t sits at position
    // context_len - query_start[r + 1] + t.
    const int64_t shift = int64_t{rows.context_len[r]} - rows.query_start[r + 1];
    const int64_t begin =
        std::max<int64_t>(rows.query_start[r], int64_t{rows.query_pos_begin} - shift);
    const int64_t end = std::min<int64_t>(rows.query_start[r + 1], rows.query_pos_end - shift);
    for (int64_t t0 = begin; t0 < end; t0 += kQueryBlock) {
      const int64_t t1 = std::min<int64_t>(t0 + kQueryBlock, end);
      for (int32_t g = 0; g < kv_heads; ++g) tasks.push_back({r, g, t0, t1});
    }
  }
  const AttentionArgs a{q.ptr<const float>(),
                        out.ptr<float>(),
                        kv.k.data,
                        kv.v.data,
                        kv.k.dtype,
                        kv.k_scales.ptr<const bf16_t>(),
                        kv.k_biases.ptr<const bf16_t>(),
                        kv.v_scales.ptr<const bf16_t>(),
                        kv.v_biases.ptr<const bf16_t>(),
                        kv.bits,
                        kv.value_bits,
                        static_cast<size_t>(kv.group_size),
                        static_cast<size_t>(q.shape[1]),
                        static_cast<size_t>(kv_heads),
                        static_cast<size_t>(kv.head_dim()),
                        static_cast<size_t>(kv.block_tokens()),
                        &rows,
                        tasks.data(),
                        params.scale,
                        params.softcap,
                        params.window,
                        params.window > 0 ? params.sink_tokens : 0};
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(tasks.size()), 1, [&](int64_t b, int64_t e) {
        HWY_DYNAMIC_DISPATCH(AttentionTasksImpl)(a, static_cast<size_t>(b), static_cast<size_t>(e));
      });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
