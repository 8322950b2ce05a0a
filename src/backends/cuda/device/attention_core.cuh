// The CUDA-core attention kernels (a block per (query token, head), and per (decode row, head,
// part) for decode shapes the grouped and tensor-core kernels do not serve) and the per-format
// launch that picks among every attention kernel (attention.cu's header says which and why).
// Included by the per-format translation units attention_dense.cu, attention_affine.cu and
// attention_turbo.cu, each instantiating launch_for_format for its readers (declared in
// attention_launch.h), so the formats compile in parallel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/attention_launch.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/attention_decode.cuh"
#include "backends/cuda/device/attention_decode_tc.cuh"
#include "backends/cuda/device/attention_prefill.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_readers.cuh"

namespace ringlm::cuda::attention_detail {

constexpr int kWarps = 4;
constexpr int kThreadsPerBlock = kWarps * 32;

using device::AttnArgs;
using device::VisibleKeys;

using Query = device::QueryLocation;

__device__ inline Query locate(const AttnArgs& a, int t) {
  return device::locate_query(a.query_start, a.context_len, a.num_rows, t);
}

template <int kChunks>
struct Partials {
  float m[kWarps], l[kWarps];
  float acc[kWarps][kChunks * 32];
};

// Online softmax of (token t, head h) over its visible keys [begin, end) (indices into `keys`).
// Leaves each warp's partial in `sh` and synchronizes the block.
template <typename Kv, int kChunks>
__device__ __forceinline__ void attend(const AttnArgs& a, const Kv& kv, int t, int h,
                                       const Query& qy, const VisibleKeys& keys, int begin, int end,
                                       Partials<kChunks>& sh) {
  const int g = h / (a.q_heads / a.kv_heads);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int D = a.head_dim;
  const int32_t* table = a.block_table + static_cast<int64_t>(qy.row) * a.max_blocks;

  const float* qrow = a.q + (static_cast<int64_t>(t) * a.q_heads + h) * D;
  float qr[kChunks], acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    qr[c] = d < D ? qrow[d] : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int i = begin + warp; i < end; i += kWarps) {
    const int j = keys.position(i);
    const int64_t slot = kv_slot(a, table, j);
    const int64_t row = slot * a.kv_heads + g;
    float dot = 0.0f, vr[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      vr[c] = 0.0f;
      if (d < D) {
        float kx[1], vx[1];
        kv.template key<1>(row, d, kx);
        kv.template value<1>(row, d, vx);
        dot += qr[c] * kx[0];
        vr[c] = vx[0];
      }
    }
    dot = device::warp_sum(dot);
    float s = dot * a.scale;
    if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * corr + p;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[c] = acc[c] * corr + p * vr[c];
    m = m_new;
  }
  if (lane == 0) {
    sh.m[warp] = m;
    sh.l[warp] = l;
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) sh.acc[warp][lane + 32 * c] = acc[c];
  __syncthreads();
}

// The warps' merge weights: m_all = max m_w, weight_w = e^(m_w − m_all), l_all = Σ l_w·weight_w.
template <int kChunks>
__device__ __forceinline__ float merge_weights(const Partials<kChunks>& sh, float* weight,
                                               float& l_all) {
  float m_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, sh.m[w]);
  l_all = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(sh.m[w] - m_all);  // 0 for a warp that saw no key (m = -inf, l = acc = 0)
    l_all += sh.l[w] * weight[w];
  }
  return m_all;
}

// Rows with several queries (and decode rows when split_decode is off): all keys, one block.
template <typename Kv, int kChunks>
__global__ void __launch_bounds__(kThreadsPerBlock)
    attention_kernel(const AttnArgs a, const Kv kv) {
  __shared__ Partials<kChunks> sh;
  const int t = static_cast<int>(blockIdx.x) / a.q_heads;
  const int h = static_cast<int>(blockIdx.x) % a.q_heads;
  const Query qy = locate(a, t);
  if ((a.split_decode && qy.n == 1) || !device::query_wanted(a, qy.pos)) return;
  const VisibleKeys keys(qy.pos, a.window, a.sink_tokens);
  attend<Kv, kChunks>(a, kv, t, h, qy, keys, 0, keys.count, sh);
  float weight[kWarps], l_all;
  merge_weights(sh, weight, l_all);
  float* orow = a.out + (static_cast<int64_t>(t) * a.q_heads + h) * a.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < a.head_dim; d += kThreadsPerBlock) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += sh.acc[w][d] * weight[w];
    orow[d] = o / l_all;
  }
}

// Split-K for decode shapes the grouped kernel does not serve (device/attention_decode.cuh):
// block (row · q_heads + head, part) over the visible keys [part·S, (part + 1)·S), S =
// split_rule.split(count); device::decode_merge_kernel merges the parts.
template <typename Kv, int kChunks>
__global__ void __launch_bounds__(kThreadsPerBlock)
    attention_split_kernel(const AttnArgs a, const Kv kv) {
  __shared__ Partials<kChunks> sh;
  const int r = static_cast<int>(blockIdx.x) / a.q_heads;
  const int h = static_cast<int>(blockIdx.x) % a.q_heads;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1) return;
  const Query qy = locate(a, q0);
  if (!device::query_wanted(a, qy.pos)) return;
  const VisibleKeys keys(qy.pos, a.window, a.sink_tokens);
  const int split = a.split_rule.split(keys.count);
  const int begin = static_cast<int>(blockIdx.y) * split;
  if (begin >= keys.count) return;  // this query has fewer parts
  attend<Kv, kChunks>(a, kv, q0, h, qy, keys, begin, min(keys.count, begin + split), sh);
  float weight[kWarps], l_all;
  const float m_all = merge_weights(sh, weight, l_all);
  const int64_t part = (static_cast<int64_t>(r) * a.q_heads + h) * a.max_parts + blockIdx.y;
  if (threadIdx.x == 0) {
    a.part_ml[2 * part] = m_all;
    a.part_ml[2 * part + 1] = l_all;
  }
  float* dst = a.part_acc + part * a.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < a.head_dim; d += kThreadsPerBlock) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += sh.acc[w][d] * weight[w];
    dst[d] = o;
  }
}

// Rows with several queries (with split_decode off, every row): on tensor cores where the format
// and shape allow (device/attention_prefill.cuh; quantized formats and head_dim 256 unless
// prefill_tc_extended() is off), else one block per (token, head), which reads every key once
// per query head.
template <typename Kv, int kChunks>
void launch_multi_query(const AttnArgs& args, const Kv& kv, int64_t T, cudaStream_t stream) {
  if constexpr (device::tensor_core_reader<Kv>()) {
    const bool extended = !device::dense_reader<Kv>() || args.head_dim == 256;
    if (args.split_decode && (!extended || prefill_tc_extended()) &&
        device::prefill_tc_supported(args.head_dim, args.q_heads / args.kv_heads)) {
      device::launch_prefill_tc(args, kv, T, stream);
      return;
    }
  }
  attention_kernel<Kv, kChunks>
      <<<static_cast<unsigned>(T * args.q_heads), kThreadsPerBlock, 0, stream>>>(args, kv);
  check_launch("attention_kernel");
}

template <typename Kv, int kChunks>
void launch(const AttnArgs& args, const Kv& kv, const RowsSummary& summary, int64_t T,
            cudaStream_t stream) {
  if (summary.other_rows > 0 || !args.split_decode)
    launch_multi_query<Kv, kChunks>(args, kv, T, stream);
  if (!args.split_decode || summary.decode_rows == 0) return;
  if constexpr (device::tensor_core_reader<Kv>()) {
    if (device::decode_tc_supported(args.head_dim)) {
      // Merging in the decode kernel (same bits) pays off where the merge also un-rotates
      // (TurboQuant decode-only steps) and the batch is small: k8v3 at 32k, +3.6 % at batch 1,
      // +0.5 % at 16, -2.2 % at 64; for 16-bit K/V the last block's serial merge of its task's
      // heads cost more than the merge kernel at every batch (-1 % at 1, -1 to -5 % at 32-256 with
      // 512 keys; docs/benchmarks.md).
      constexpr int kMergeInKernelMaxRows = 16;
      if (!decode_merge_in_kernel() || args.merge_unrotate_signs == nullptr ||
          summary.decode_rows > kMergeInKernelMaxRows) {
        // One part a row: no partials, no merge kernel (16-bit K/V: the other formats' kernels
        // do not compile the branch, decode_tc_common.cuh tc_write_partials says why).
        if (device::dense_reader<Kv>() && take_direct_decode(args)) {
          AttnArgs direct = args;
          direct.direct_out = true;
          device::launch_decode_tc(direct, kv, stream);
          return;
        }
        device::launch_decode_tc(args, kv, stream);
        device::launch_decode_merge(args, stream);
        return;
      }
      // The last block of each task merges its heads: no merge kernel.
      AttnArgs merging = args;
      const unsigned tasks = device::tc_decode_grid(args).x;
      merging.merge_tickets = static_cast<int*>(Context::get().scratch(
          Scratch::MergeTickets, size_t{tasks} * sizeof(int), /*zeroed=*/true));
      device::launch_decode_tc(merging, kv, stream);
      return;
    }
  }
  if (device::grouped_decode_supported(args.head_dim, args.q_heads / args.kv_heads)) {
    device::launch_grouped_decode(args, kv, stream);
    return;
  }
  const dim3 grid(static_cast<unsigned>(args.num_rows * args.q_heads),
                  static_cast<unsigned>(args.max_parts));
  attention_split_kernel<Kv, kChunks><<<grid, kThreadsPerBlock, 0, stream>>>(args, kv);
  check_launch("attention_split_kernel");
  device::launch_decode_merge(args, stream);
}

template <typename Kv>
void launch_for_format(const AttnArgs& args, const Kv& kv, const RowsSummary& summary, int64_t T,
                       cudaStream_t stream) {
  const int D = args.head_dim;
  if (D <= 32) {
    launch<Kv, 1>(args, kv, summary, T, stream);
  } else if (D <= 64) {
    launch<Kv, 2>(args, kv, summary, T, stream);
  } else if (D <= 128) {
    launch<Kv, 4>(args, kv, summary, T, stream);
  } else {
    launch<Kv, 8>(args, kv, summary, T, stream);
  }
}

}  // namespace ringlm::cuda::attention_detail
