// CPU causal GQA attention over paged K/V (f32, bf16 or f16 cache), flash-style online softmax.
//
// One task per (token, kv head): the q heads sharing that kv head (GQA) walk the token's keys
// together, so each K/V row is widened to f32 once per group. Keys are visited in chunks aligned
// to absolute positions (multiples of kChunk), so the operations that produce a query's output
// depend only on its own position, window and keys — not on the other rows or queries in the
// step, the chunk of a prefill it belongs to, or the thread split (batch invariance).
//
// Per chunk: s_j = (q·k_j) · scale (softcapped: cap · tanh(s / cap)); m' = max(m, max_j s_j);
// acc and l are rescaled by exp(m − m'); p_j = exp(s_j − m'); l += p_j; acc += p_j · v_j.
// Finally out = acc / l. All in f32; dot products run over head_dim zero-padded to whole vectors.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/attention.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <hwy/aligned_allocator.h>
#include <hwy/contrib/math/math-inl.h>

#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/scalar.h"
#include "core/thread_pool.h"

#ifndef RINGLM_BACKENDS_CPU_ATTENTION_SHARED_
#define RINGLM_BACKENDS_CPU_ATTENTION_SHARED_
namespace ringlm::cpu {
struct AttentionArgs {
  const float* q;  // [T, q_heads, D]
  float* out;      // [T, q_heads, D]
  const void* k;   // [num_blocks, block_tokens, kv_heads, D] in `kv_dtype`
  const void* v;
  DType kv_dtype;
  size_t q_heads, kv_heads, D, block_tokens;
  const ops::AttentionRows* rows;
  const int32_t* token_row;  // [T]: the row each token belongs to
  float scale, softcap;
  int64_t window;
};
}  // namespace ringlm::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

constexpr size_t kChunk = 32;  // keys per online-softmax step; a multiple of every lane count

// Scratch for one task, reused across the tasks a thread runs.
struct Scratch {
  size_t Dp = 0, group = 0;
  hwy::AlignedFreeUniquePtr<float[]> q, acc, keys, vals, scores;
  std::vector<float> m, l;
  void Init(size_t dp, size_t g) {
    Dp = dp;
    group = g;
    q = hwy::AllocateAligned<float>(g * dp);
    acc = hwy::AllocateAligned<float>(g * dp);
    keys = hwy::AllocateAligned<float>(kChunk * dp);
    vals = hwy::AllocateAligned<float>(kChunk * dp);
    scores = hwy::AllocateAligned<float>(g * kChunk);
    std::fill(keys.get(), keys.get() + kChunk * dp, 0.0f);  // padding stays 0
    std::fill(vals.get(), vals.get() + kChunk * dp, 0.0f);
    std::fill(q.get(), q.get() + g * dp, 0.0f);
    m.resize(g);
    l.resize(g);
  }
};

template <typename KV>
void Task(const AttentionArgs& a, Scratch& s, size_t t, size_t g) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t D = a.D, Dp = s.Dp, group = s.group;
  const ops::AttentionRows& rows = *a.rows;
  const int32_t r = a.token_row[t];
  const int64_t n = rows.query_start[r + 1] - rows.query_start[r];
  const int64_t pos = rows.context_len[r] - n + (static_cast<int64_t>(t) - rows.query_start[r]);
  const int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
  const int32_t* table =
      rows.block_table + static_cast<size_t>(r) * static_cast<size_t>(rows.max_blocks);
  const auto* k_base = static_cast<const KV*>(a.k);
  const auto* v_base = static_cast<const KV*>(a.v);
  const size_t token_stride = a.kv_heads * D;  // elements between consecutive slots

  for (size_t h = 0; h < group; ++h) {
    const float* qh = a.q + (t * a.q_heads + g * group + h) * D;
    std::copy(qh, qh + D, s.q.get() + h * Dp);
    std::fill(s.acc.get() + h * Dp, s.acc.get() + (h + 1) * Dp, 0.0f);
    s.m[h] = -std::numeric_limits<float>::infinity();
    s.l[h] = 0.0f;
  }

  const auto vscale = hn::Set(df, a.scale);
  const auto vcap = hn::Set(df, a.softcap);
  for (int64_t c0 = lo - lo % static_cast<int64_t>(kChunk); c0 <= pos;
       c0 += static_cast<int64_t>(kChunk)) {
    const int64_t j0 = std::max(c0, lo);
    const int64_t j1 = std::min(c0 + static_cast<int64_t>(kChunk), pos + 1);
    // Widen this chunk's K and V rows into [kChunk, Dp] f32 (slot index j - c0).
    for (int64_t j = j0; j < j1; ++j) {
      const auto bt = static_cast<int64_t>(a.block_tokens);
      const size_t slot =
          static_cast<size_t>(table[j / bt]) * a.block_tokens + static_cast<size_t>(j % bt);
      const size_t off = slot * token_stride + g * D;
      float* kd = s.keys.get() + static_cast<size_t>(j - c0) * Dp;
      float* vd = s.vals.get() + static_cast<size_t>(j - c0) * Dp;
      for (size_t d = 0; d < D; ++d) kd[d] = to_f32(k_base[off + d]);
      for (size_t d = 0; d < D; ++d) vd[d] = to_f32(v_base[off + d]);
    }
    for (size_t h = 0; h < group; ++h) {
      float* sc = s.scores.get() + h * kChunk;
      const float* q = s.q.get() + h * Dp;
      for (size_t j = 0; j < kChunk; ++j) sc[j] = 0.0f;
      for (int64_t j = j0; j < j1; ++j) {
        const float* kd = s.keys.get() + static_cast<size_t>(j - c0) * Dp;
        auto dot = hn::Zero(df);
        for (size_t d = 0; d < Dp; d += L)
          dot = hn::MulAdd(hn::Load(df, q + d), hn::Load(df, kd + d), dot);
        sc[j - c0] = ReduceSumF32(df, dot);
      }
      // Scale (and soft-cap) the whole chunk at once; unused slots hold 0 and are ignored.
      for (size_t j = 0; j < kChunk; j += L) {
        auto v = hn::Mul(hn::Load(df, sc + j), vscale);
        if (a.softcap > 0.0f) v = hn::Mul(vcap, hn::Tanh(df, hn::Div(v, vcap)));
        hn::Store(v, df, sc + j);
      }
      float chunk_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = j0; j < j1; ++j) chunk_max = std::max(chunk_max, sc[j - c0]);
      const float m_old = s.m[h];
      const float m_new = std::max(m_old, chunk_max);
      float* acc = s.acc.get() + h * Dp;
      if (m_new > m_old && s.l[h] > 0.0f) {  // rescale what was accumulated under the old max
        const float corr = std::exp(m_old - m_new);
        s.l[h] *= corr;
        const auto vc = hn::Set(df, corr);
        for (size_t d = 0; d < Dp; d += L)
          hn::Store(hn::Mul(hn::Load(df, acc + d), vc), df, acc + d);
      }
      s.m[h] = m_new;
      const auto vm = hn::Set(df, m_new);
      for (size_t j = 0; j < kChunk; j += L) {
        hn::Store(hn::Exp(df, hn::Min(hn::Sub(hn::Load(df, sc + j), vm), hn::Zero(df))), df,
                  sc + j);
      }
      float l = s.l[h];
      for (int64_t j = j0; j < j1; ++j) {
        const float p = sc[j - c0];
        l += p;
        const auto vp = hn::Set(df, p);
        const float* vd = s.vals.get() + static_cast<size_t>(j - c0) * Dp;
        for (size_t d = 0; d < Dp; d += L) {
          hn::Store(hn::MulAdd(vp, hn::Load(df, vd + d), hn::Load(df, acc + d)), df, acc + d);
        }
      }
      s.l[h] = l;
    }
  }

  for (size_t h = 0; h < group; ++h) {
    float* o = a.out + (t * a.q_heads + g * group + h) * D;
    const float* acc = s.acc.get() + h * Dp;
    const float l = s.l[h];
    for (size_t d = 0; d < D; ++d) o[d] = acc[d] / l;
  }
}

void AttentionTasksImpl(const AttentionArgs& a, size_t begin, size_t end) {
  const size_t L = hn::Lanes(DF());
  Scratch s;
  s.Init((a.D + L - 1) / L * L, a.q_heads / a.kv_heads);
  for (size_t task = begin; task < end; ++task) {
    const size_t t = task / a.kv_heads, g = task % a.kv_heads;
    switch (a.kv_dtype) {
      case DType::F32:
        Task<float>(a, s, t, g);
        break;
      case DType::BF16:
        Task<hwy::bfloat16_t>(a, s, t, g);
        break;
      case DType::F16:
        Task<hwy::float16_t>(a, s, t, g);
        break;
      default:
        break;
    }
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
  const auto T = static_cast<size_t>(q.shape[0]);
  std::vector<int32_t> token_row(T);
  for (int32_t r = 0; r < rows.num_rows; ++r) {
    for (int32_t t = rows.query_start[r]; t < rows.query_start[r + 1]; ++t)
      token_row[static_cast<size_t>(t)] = r;
  }
  const AttentionArgs a{q.ptr<const float>(),
                        out.ptr<float>(),
                        kv.k.data,
                        kv.v.data,
                        kv.k.dtype,
                        static_cast<size_t>(q.shape[1]),
                        static_cast<size_t>(kv.kv_heads()),
                        static_cast<size_t>(kv.head_dim()),
                        static_cast<size_t>(kv.block_tokens()),
                        &rows,
                        token_row.data(),
                        params.scale,
                        params.softcap,
                        params.window};
  const auto tasks = static_cast<int64_t>(T * a.kv_heads);
  ThreadPool::global().parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(AttentionTasksImpl)(a, static_cast<size_t>(b), static_cast<size_t>(e));
  });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
