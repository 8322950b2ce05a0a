// The merge of a decode query's split-K parts into its output row: the decode kernels leave
// (m, l, acc) per (row, head, part); the merge weighs the parts by 2^(m_p − m_all), sums them in
// part order and divides by the summed l. For TurboQuant the same pass also applies the deferred
// inverse rotation: no rotation kernel in decode steps.
// Both merges run the same functions on the same partials, so a row's bits do not depend on
// which one ran (or on the batch: the split rule depends on the row alone).
#pragma once

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/quant_common.cuh"

namespace ringlm::cuda::device {

// What merging decode row r's head h takes from the step's row tables. The host writes those
// before the step's first kernel, so the merge kernel reads them before it waits for the decode
// kernel: one dependent L2 round trip less after the wait.
struct MergeTask {
  bool wanted = false;  // false: row r has no decode query to merge here (several queries, or
                        // one outside the computed range)
  int parts = 0;
  int64_t base = 0;     // (row, head)'s first part slot
  int64_t out_row = 0;  // its output row: query · q_heads + h
};

__device__ __forceinline__ MergeTask merge_task(const AttnArgs& a, int r, int h) {
  MergeTask t;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1 || !query_wanted(a, a.context_len[r] - 1)) return t;
  const VisibleKeys keys(a.context_len[r] - 1, a.window, a.sink_tokens);
  t.wanted = true;
  t.parts = a.split_rule.parts(keys.count);
  t.base = (static_cast<int64_t>(r) * a.q_heads + h) * a.max_parts;
  t.out_row = static_cast<int64_t>(q0) * a.q_heads + h;
  return t;
}

// One warp merges decode row r's head h (task t, merge_task's): dim 32c + lane (c < kSlots,
// dims past head_dim left zero) into y[c]; false when row r has no decode query to merge here.
// Lane p of each run of 32 parts loads that part's m and l once and weighs it (2^(m_p − m_all)
// in natural units); the output sums the parts in part order. A merge is a chain of L2 reads of
// other blocks' partials and its latency is what a decode step waits for, so each lane keeps
// kMergeLoads loads in flight (a batch of parts), and the first batch goes out with m and l:
// at 33 parts and head_dim 128, 5 dependent round trips where 2 parts a batch and m and l read
// twice took 18.
constexpr int kMergeLoads = 32;
template <int kSlots>
__device__ __forceinline__ bool merge_head(const AttnArgs& a, const MergeTask& t,
                                           float (&y)[kSlots]) {
  if (!t.wanted) return false;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int parts = t.parts;
  const int64_t stride = a.head_dim;
  constexpr int kBatch = kMergeLoads / kSlots;
  const auto load_batch = [&](const float* acc, int j0, int n, float(&x)[kBatch][kSlots]) {
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
#pragma unroll
      for (int c = 0; c < kSlots; ++c) {
        const bool in = j0 + i < n && 32 * c + lane < stride;
        x[i][c] = in ? acc[(j0 + i) * stride + 32 * c] : 0.0f;
      }
    }
  };
  const float* acc0 = a.part_acc + t.base * stride + lane;
  float x[kBatch][kSlots];
  load_batch(acc0, 0, min(32, parts), x);
  // m and l of this lane's part of the first run of 32 parts stay in registers; a later run's
  // (past 32 parts) are read again, from L1.
  const float2* ml = reinterpret_cast<const float2*>(a.part_ml) + t.base;
  const float2 first_ml = lane < parts ? ml[lane] : make_float2(-INFINITY, 0.0f);
  float m_all = first_ml.x;
  for (int p = 32 + lane; p < parts; p += 32) m_all = fmaxf(m_all, ml[p].x);
  m_all = warp_max(m_all);
  float l_lane = 0.0f;
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = 0.0f;
  for (int p0 = 0; p0 < parts; p0 += 32) {
    const int p = p0 + lane, n = min(32, parts - p0);
    const float2 part_ml = p0 == 0 ? first_ml : (p < parts ? ml[p] : first_ml);
    const float w = p < parts ? expf(part_ml.x - m_all) : 0.0f;
    l_lane += p < parts ? part_ml.y * w : 0.0f;
    const float* acc = acc0 + p0 * stride;
    for (int j0 = 0; j0 < n; j0 += kBatch) {
      if (p0 + j0 > 0) load_batch(acc, j0, n, x);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const float wi = __shfl_sync(kFullMask, w, (j0 + i) & 31);  // 0 past the parts
#pragma unroll
        for (int c = 0; c < kSlots; ++c) y[c] += x[i][c] * wi;
      }
    }
  }
  const float l_all = warp_sum(l_lane);  // xor butterfly: every lane gets the same bits
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = y[c] / l_all;
  return true;
}

// One merged output element (index `at` of [T, q_heads, D]): into out_rounded rounded where the
// step asks for it, else into out.
__device__ __forceinline__ void store_output(const AttnArgs& a, int64_t at, float y) {
  if (a.out_rounded != nullptr) {
    store_float(a.out_rounded, a.out_rounded_dtype, at, y);
  } else {
    a.out[at] = y;
  }
}

// Stores a merged row (merge_head's y) as output row out_row: un-rotated first with
// merge_unrotate_signs (head_dim = 32·kSlots then), then store_output.
template <int kSlots>
__device__ __forceinline__ void store_merged(const AttnArgs& a, int64_t out_row,
                                             float (&y)[kSlots]) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (a.merge_unrotate_signs != nullptr) unrotate<kSlots>(y, a.merge_unrotate_signs);
  const int64_t at = out_row * a.head_dim;
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    const int d = 32 * c + lane;
    if (d < a.head_dim) store_output(a, at + d, y[c]);
  }
}

// Heads h0 .. h0 + heads - 1 of decode row r merged into out by one block of kThreads threads,
// a warp per head, and, with merge_unrotate_signs, un-rotated: the merge kernels' functions on the
// same partials, so the same bits. Used by the last block of a tensor-core decode task
// (tc_write_partials).
template <int kD, int kThreads>
__device__ __forceinline__ void merge_heads(const AttnArgs& a, int r, int h0, int heads) {
  constexpr int kSlots = kD / 32;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  for (int hh = warp; hh < heads; hh += kThreads / 32) {
    const MergeTask t = merge_task(a, r, h0 + hh);
    float y[kSlots];
    if (!merge_head<kSlots>(a, t, y)) continue;
    store_merged<kSlots>(a, t.out_row, y);
  }
}

// One warp per (row, head) merges the decode query's parts into out (merge_head); with
// merge_unrotate_signs (TurboQuant) it then applies x = signs ⊙ H(x)/√d to the row in registers,
// the ops of turbo_rotation.cu's kernel (bit for bit kv::turbo_unrotate). kSlots ≥ head_dim / 32.
constexpr int kMergeWarps = 4;
template <int kSlots>
__global__ void __launch_bounds__(32 * kMergeWarps) decode_merge_kernel(const AttnArgs a) {
  const int64_t task = int64_t{blockIdx.x} * kMergeWarps + (threadIdx.x >> 5);
  MergeTask t;  // from the row tables, before the wait
  const int r = static_cast<int>(task / a.q_heads), h = static_cast<int>(task % a.q_heads);
  if (task < int64_t{a.num_rows} * a.q_heads) t = merge_task(a, r, h);
  wait_prior_grid();
  launch_dependents();
  float y[kSlots];
  if (!merge_head<kSlots>(a, t, y)) return;  // the whole warp
  store_merged<kSlots>(a, t.out_row, y);
}

// Merges every decode row's parts (args.part_ml/part_acc) into out; with
// args.merge_unrotate_signs, un-rotated (head_dim a power of two, 32 … 256).
inline void launch_decode_merge(const AttnArgs& args, cudaStream_t stream) {
  const int64_t tasks = int64_t{args.num_rows} * args.q_heads;
  const dim3 grid(static_cast<unsigned>((tasks + kMergeWarps - 1) / kMergeWarps));
  const auto launch = [&]<int kSlots>() {
    launch_pdl(decode_merge_kernel<kSlots>, grid, dim3(32 * kMergeWarps), 0, stream, args);
  };
  const int D = args.head_dim;
  if (args.merge_unrotate_signs != nullptr) {
    with_turbo_slots(D, launch);  // a power of two
  } else if (D <= 32) {
    launch.template operator()<1>();
  } else if (D <= 64) {
    launch.template operator()<2>();
  } else if (D <= 128) {
    launch.template operator()<4>();
  } else {
    launch.template operator()<8>();  // attention's kMaxHeadDim
  }
  check_launch("decode_merge_kernel");
}

}  // namespace ringlm::cuda::device
