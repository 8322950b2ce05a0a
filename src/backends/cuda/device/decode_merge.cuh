// The merge of a decode query's split-K parts into its output row: the decode kernels leave
// (m, l, acc) per (row, head, part); the merge weighs the parts by 2^(m_p − m_all) in part order
// and divides by the summed l. For TurboQuant the same pass can also apply the deferred inverse
// rotation (turbo_decode_merge_kernel): one kernel less per layer in decode steps.
// Both merges run the same functions on the same partials, so a row's bits do not depend on
// which one ran (or on the batch: the split rule depends on the row alone).
#pragma once

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/quant_common.cuh"

namespace ringlm::cuda::device {

// The parts of decode row r's head h and their merged m and l.
struct MergedParts {
  int parts;
  int64_t base;  // (r · q_heads + h) · max_parts: the first part's slot
  float m_all, l_all;
  int64_t out_row;  // q0 · q_heads + h: the output row
};

// False when row r has no decode query to merge here (several queries, or one outside the
// computed range).
__device__ __forceinline__ bool merged_parts(const AttnArgs& a, int r, int h, MergedParts& mp) {
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1 || !query_wanted(a, a.context_len[r] - 1)) return false;
  const VisibleKeys keys(a.context_len[r] - 1, a.window, a.sink_tokens);
  mp.parts = a.split_rule.parts(keys.count);
  mp.base = (static_cast<int64_t>(r) * a.q_heads + h) * a.max_parts;
  mp.out_row = static_cast<int64_t>(q0) * a.q_heads + h;
  mp.m_all = -INFINITY;
  for (int p = 0; p < mp.parts; ++p) mp.m_all = fmaxf(mp.m_all, a.part_ml[2 * (mp.base + p)]);
  mp.l_all = 0.0f;
  for (int p = 0; p < mp.parts; ++p)
    mp.l_all += a.part_ml[2 * (mp.base + p) + 1] * expf(a.part_ml[2 * (mp.base + p)] - mp.m_all);
  return true;
}

// Output dim d of the merged row.
__device__ __forceinline__ float merged_output(const AttnArgs& a, const MergedParts& mp, int d) {
  float o = 0.0f;
  for (int p = 0; p < mp.parts; ++p)
    o += a.part_acc[(mp.base + p) * a.head_dim + d] * expf(a.part_ml[2 * (mp.base + p)] - mp.m_all);
  return o / mp.l_all;
}

// Heads h0 .. h0 + heads - 1 of decode row r merged into out by one block of kThreads threads,
// a warp per head — the merge kernels' functions on the same partials, so the same bits — and,
// with merge_unrotate_signs, un-rotated as turbo_decode_merge_kernel does. Used by the last
// block of a tensor-core decode task (tc_write_partials).
template <int kD, int kThreads>
__device__ __forceinline__ void merge_heads(const AttnArgs& a, int r, int h0, int heads) {
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  for (int hh = warp; hh < heads; hh += kThreads / 32) {
    MergedParts mp;
    if (!merged_parts(a, r, h0 + hh, mp)) continue;
    float* orow = a.out + mp.out_row * kD;
    if (a.merge_unrotate_signs != nullptr) {
      constexpr int kSlots = kD / 32;
      float y[kSlots];
#pragma unroll
      for (int c = 0; c < kSlots; ++c) y[c] = merged_output(a, mp, c * 32 + lane);
      store_unrotated<kSlots>(y, a.merge_unrotate_signs, orow);
    } else {
      for (int d = lane; d < kD; d += 32) orow[d] = merged_output(a, mp, d);
    }
  }
}

// Block (row · q_heads + head) merges the decode query's parts in order into out. A template (on
// its block size) so that the translation units including this header share one definition.
constexpr int kMergeThreads = 128;
template <int kThreads>
__global__ void __launch_bounds__(kThreads) grouped_decode_merge_kernel(const AttnArgs a) {
  wait_prior_grid();
  launch_dependents();
  MergedParts mp;
  const int r = static_cast<int>(blockIdx.x) / a.q_heads;
  if (!merged_parts(a, r, static_cast<int>(blockIdx.x) % a.q_heads, mp)) return;
  float* orow = a.out + mp.out_row * a.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < a.head_dim; d += kThreads)
    orow[d] = merged_output(a, mp, d);
}

// TurboQuant: one warp per (row, head) merges dims 32c + lane (c < kSlots) as above, then applies
// x = signs ⊙ H(x)/√d to the row in registers, the ops of turbo_rotation.cu's kernel (bit for bit
// kv::turbo_unrotate).
constexpr int kMergeWarps = 4;
template <int kSlots>
__global__ void __launch_bounds__(32 * kMergeWarps) turbo_decode_merge_kernel(const AttnArgs a) {
  wait_prior_grid();
  launch_dependents();
  constexpr int kDim = 32 * kSlots;  // = head_dim
  const int64_t task = int64_t{blockIdx.x} * kMergeWarps + (threadIdx.x >> 5);
  if (task >= int64_t{a.num_rows} * a.q_heads) return;  // the whole warp
  MergedParts mp;
  if (!merged_parts(a, static_cast<int>(task / a.q_heads), static_cast<int>(task % a.q_heads), mp))
    return;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float y[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = merged_output(a, mp, c * 32 + lane);
  store_unrotated<kSlots>(y, a.merge_unrotate_signs, a.out + mp.out_row * kDim);
}

// Merges every decode row's parts (args.part_ml/part_acc) into out; with
// args.merge_unrotate_signs, un-rotated (head_dim a power of two, 32 … 256).
inline void launch_decode_merge(const AttnArgs& args, cudaStream_t stream) {
  if (args.merge_unrotate_signs != nullptr) {
    const int64_t tasks = int64_t{args.num_rows} * args.q_heads;
    const auto blocks = static_cast<unsigned>((tasks + kMergeWarps - 1) / kMergeWarps);
    with_turbo_slots(args.head_dim, [&]<int kSlots>() {
      launch_pdl(turbo_decode_merge_kernel<kSlots>, dim3(blocks), dim3(32 * kMergeWarps), 0, stream,
                 args);
    });
    check_launch("turbo_decode_merge_kernel");
    return;
  }
  launch_pdl(grouped_decode_merge_kernel<kMergeThreads>,
             dim3(static_cast<unsigned>(args.num_rows * args.q_heads)), dim3(kMergeThreads), 0,
             stream, args);
  check_launch("grouped_decode_merge_kernel");
}

}  // namespace ringlm::cuda::device
