// Decode attention (rows with one query), GQA-grouped split-K: one thread block per
// (row, kv head, part) serves all kG query heads that read that kv head, so each K/V row is loaded
// once per step instead of once per query head.
//
// A block's 128 threads form 128 / kLanes key groups of kLanes lanes; a key group walks the
// part's keys i = first + group, first + group + kKeyGroups, ... (two keys per iteration) and
// lane l of it holds dims [8l, 8l + 8) of the kG queries, of their running outputs and of each key
// and value row (read with N = 8 through the format's reader: one 16-byte load for bf16; 16-bit
// formats are loaded one iteration ahead, packed). Per key and head: t = log2(e)·s with
// s = q·k · scale (soft-capped); when t > m + 8 the reference moves (m' = t, l and acc scaled by
// 2^(m − m')); then p = 2^(t − m), l += p, acc += p·v. The key groups merge in shared memory in
// group order and the block writes its part's (m, l, acc) per head; decode_merge_kernel
// merges the parts in order.
// Every step is a fixed sequence on the row's own keys (the split rule depends on the row alone):
// a row's bits are the same alone or batched.
#pragma once

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/decode_merge.cuh"
#include "backends/cuda/device/kv_load.cuh"

namespace ringlm::cuda::device {

constexpr int kDecodeThreads = 128;
constexpr float kRescaleLog2 = 8.0f;  // weights stay ≤ 2^8 between rescales

// Which decode shapes this kernel serves (others use the per-head kernels in attention.cu).
inline bool grouped_decode_supported(int head_dim, int group) {
  return head_dim % 8 == 0 && head_dim <= 256 &&
         (group == 1 || group == 2 || group == 4 || group == 8);
}

template <int kLanes, int kG, int kHeadDim>
struct DecodeShared {
  static constexpr int kKeyGroups = kDecodeThreads / kLanes;
  float m[kKeyGroups][kG], l[kKeyGroups][kG];
  float acc[kKeyGroups][kG][kHeadDim];
};

template <int kLanes>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// kHeadDim = 8·kLanes is the widest head dim this instantiation serves (narrower ones leave the
// top lanes idle).
// At most 128 registers up to 4 heads per group: 4 blocks (16 warps) per SM keep enough loads in
// flight; 8 heads need more registers than that without spilling.
template <typename Kv, int kLanes, int kG>
__global__ void __launch_bounds__(kDecodeThreads, kG <= 4 ? 4 : 2)
    grouped_decode_kernel(const AttnArgs a, const Kv kv) {
  constexpr int kHeadDim = 8 * kLanes, kKeyGroups = kDecodeThreads / kLanes;
  __shared__ DecodeShared<kLanes, kG, kHeadDim> sh;
  const int r = static_cast<int>(blockIdx.x) / a.kv_heads;
  const int kvh = static_cast<int>(blockIdx.x) % a.kv_heads;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1) return;
  const int pos = a.context_len[r] - 1;
  if (!query_wanted(a, pos)) return;
  const VisibleKeys keys(pos, a.window, a.sink_tokens);
  const int split = a.split_rule.split(keys.count);
  const int part = static_cast<int>(blockIdx.y);
  const int first = part * split;
  if (first >= keys.count) return;  // this query has fewer parts
  const int last = min(keys.count, first + split);

  const int group = static_cast<int>(threadIdx.x) / kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int D = a.head_dim, d0 = 8 * lane;
  const bool active = d0 < D;
  const int32_t* table = a.block_table + static_cast<int64_t>(r) * a.max_blocks;

  float q[kG][8], acc[kG][8], m[kG], l[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const float* qrow = a.q + (static_cast<int64_t>(q0) * a.q_heads + kvh * kG + g) * D + d0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      q[g][i] = active ? qrow[i] : 0.0f;
      acc[g][i] = 0.0f;
    }
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }

  auto kv_row = [&](int i) {
    const int p = keys.position(i);
    const int64_t slot = kv_slot(a, table, p);
    return slot * a.kv_heads + kvh;
  };
  // Scores are kept in log2 units (exp2 is one instruction). The reference m[g] moves only when
  // a score exceeds it by more than kRescaleLog2 (lazy rescaling, as in FlashAttention 4): in
  // between, the weights 2^(t − m) stay ≤ 2^kRescaleLog2 and the per-dim rescale of acc, the
  // costliest part of the update, is skipped. (m, l, acc) always mean l = Σ 2^(t − m),
  // acc = Σ 2^(t − m)·v over the keys seen.
  // Every lane of the warp runs every iteration (the group sums are warp shuffles); a key group
  // past the part's end computes on zeros and skips the update.
  auto consume = [&](const float(&kx)[8], const float(&vx)[8], bool valid) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) dot += q[g][i] * kx[i];
      float s = group_sum<kLanes>(dot) * a.scale;
      if (!valid) continue;
      if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
      const float t = s * kLog2e;
      if (t > m[g] + kRescaleLog2) {         // always for the first key (m = -inf)
        const float corr = exp2f(m[g] - t);  // 0 for the first key
        l[g] *= corr;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] *= corr;
        m[g] = t;
      }
      const float p = exp2f(t - m[g]);
      l[g] += p;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(p, vx[i], acc[g][i]);
    }
  };

  // The warp's first key group has the most keys: its count drives the warp's loop. Each
  // iteration consumes two keys per key group.
  const int warp_offset = group % (32 / kLanes);
  const int start = first + group - warp_offset;
  if constexpr (has_raw8<Kv>()) {
    // Software pipelined: the next iteration's two K/V rows are loaded (packed, 16 registers)
    // before this iteration's are consumed, so loads stay in flight through the math.
    struct Fetched {
      uint4 k_a, v_a, k_b, v_b;
      bool valid_a, valid_b;
    };
    auto fetch = [&](int i0) {
      Fetched f;
      const int i_a = i0 + warp_offset, i_b = i_a + kKeyGroups;
      f.valid_a = i_a < last;
      f.valid_b = i_b < last;
      f.k_a = f.v_a = f.k_b = f.v_b = make_uint4(0, 0, 0, 0);
      if (active && f.valid_a) {
        const int64_t row = kv_row(i_a);
        f.k_a = kv.raw_key8(row, d0);
        f.v_a = kv.raw_value8(row, d0);
      }
      if (active && f.valid_b) {
        const int64_t row = kv_row(i_b);
        f.k_b = kv.raw_key8(row, d0);
        f.v_b = kv.raw_value8(row, d0);
      }
      return f;
    };
    Fetched current = fetch(start);
    for (int i0 = start; i0 < last; i0 += 2 * kKeyGroups) {
      const Fetched next = fetch(i0 + 2 * kKeyGroups);
      float kx[8], vx[8];
      Kv::unpack8(current.k_a, kx);
      Kv::unpack8(current.v_a, vx);
      consume(kx, vx, current.valid_a);
      Kv::unpack8(current.k_b, kx);
      Kv::unpack8(current.v_b, vx);
      consume(kx, vx, current.valid_b);
      current = next;
    }
  } else {
    // Two keys in flight per key group: both rows' loads are issued before either is consumed.
    for (int i0 = start; i0 < last; i0 += 2 * kKeyGroups) {
      const int i_a = i0 + warp_offset, i_b = i_a + kKeyGroups;
      const bool valid_a = i_a < last, valid_b = i_b < last;
      float k0[8] = {}, v0[8] = {}, k1[8] = {}, v1[8] = {};
      if (active && valid_a) {
        const int64_t row = kv_row(i_a);
        kv.template key<8>(row, d0, k0);
        kv.template value<8>(row, d0, v0);
      }
      if (active && valid_b) {
        const int64_t row = kv_row(i_b);
        kv.template key<8>(row, d0, k1);
        kv.template value<8>(row, d0, v1);
      }
      consume(k0, v0, valid_a);
      consume(k1, v1, valid_b);
    }
  }

  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      sh.m[group][g] = m[g];
      sh.l[group][g] = l[g];
    }
  }
  if (active) {
#pragma unroll
    for (int g = 0; g < kG; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) sh.acc[group][g][d0 + e] = acc[g][e];
  }
  __syncthreads();

  // The key groups' merge, in group order: weight_k = 2^(m_k − m_all) (0 for a group that saw
  // no key), l_all = Σ l_k·weight_k, acc = Σ acc_k·weight_k. The part's m is written in natural
  // units (the merge kernel's, shared with attention.cu's per-head split kernel).
  for (int e = static_cast<int>(threadIdx.x); e < kG * D; e += kDecodeThreads) {
    const int g = e / D, d = e % D;
    float m_all = -INFINITY;
#pragma unroll
    for (int k = 0; k < kKeyGroups; ++k) m_all = fmaxf(m_all, sh.m[k][g]);
    float l_all = 0.0f, o = 0.0f;
#pragma unroll
    for (int k = 0; k < kKeyGroups; ++k) {
      const float w = exp2f(sh.m[k][g] - m_all);
      l_all += sh.l[k][g] * w;
      o += sh.acc[k][g][d] * w;
    }
    const int64_t slot = (static_cast<int64_t>(r) * a.q_heads + kvh * kG + g) * a.max_parts + part;
    if (d == 0) {
      a.part_ml[2 * slot] = m_all * kLn2;
      a.part_ml[2 * slot + 1] = l_all;
    }
    a.part_acc[slot * D + d] = o;
  }
}

template <typename Kv, int kLanes>
void launch_grouped_decode_lanes(const AttnArgs& args, const Kv& kv, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(args.num_rows * args.kv_heads),
                  static_cast<unsigned>(args.max_parts));
  switch (args.q_heads / args.kv_heads) {
    case 1:
      grouped_decode_kernel<Kv, kLanes, 1><<<grid, kDecodeThreads, 0, stream>>>(args, kv);
      break;
    case 2:
      grouped_decode_kernel<Kv, kLanes, 2><<<grid, kDecodeThreads, 0, stream>>>(args, kv);
      break;
    case 4:
      grouped_decode_kernel<Kv, kLanes, 4><<<grid, kDecodeThreads, 0, stream>>>(args, kv);
      break;
    default:
      grouped_decode_kernel<Kv, kLanes, 8><<<grid, kDecodeThreads, 0, stream>>>(args, kv);
      break;
  }
}

// The decode rows of a step (grouped_decode_supported(head_dim, q_heads / kv_heads) must hold;
// args.part_ml/part_acc hold num_rows · q_heads · max_parts partials).
template <typename Kv>
void launch_grouped_decode(const AttnArgs& args, const Kv& kv, cudaStream_t stream) {
  const int lanes = (args.head_dim + 7) / 8;
  if (lanes <= 4) {
    launch_grouped_decode_lanes<Kv, 4>(args, kv, stream);
  } else if (lanes <= 8) {
    launch_grouped_decode_lanes<Kv, 8>(args, kv, stream);
  } else if (lanes <= 16) {
    launch_grouped_decode_lanes<Kv, 16>(args, kv, stream);
  } else {
    launch_grouped_decode_lanes<Kv, 32>(args, kv, stream);
  }
  check_launch("grouped_decode_kernel");
  launch_decode_merge(args, stream);
}

}  // namespace ringlm::cuda::device
