// What the tensor-core decode kernels share (device/attention_decode_tc.cuh: K/V through
// shared-memory tiles; device/attention_decode_turbo.cuh: TurboQuant codes decoded straight into
// mma fragments): the block's task, the query fragments, the online softmax of one 16-key tile
// and the block's partial result.
//
// A block of four (or eight: AttnArgs::decode_warps) warps serves one (row, kv head, group of up
// to 8 of its query heads, part).
// The query heads are the rows of mma.sync m16n8k16 (padded to 16): S = Q·Kᵀ for 16 keys is two
// n-tiles of 8 keys; Oᵀ += Vᵀ·Pᵀ has head_dim/16 m-tiles of dims × 8 heads. The kernels differ
// only in which dims a lane's fragments hold (a dot product does not depend on the order of its
// terms): `QDims` and `ODims` below say it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/decode_merge.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"

namespace ringlm::cuda::device {

constexpr int kTcDecodeWarps = 4, kTcDecodeThreads = 32 * kTcDecodeWarps;  // the default block
constexpr int kTcHeads = 8;  // query heads per block (the mma's N of Oᵀ)
constexpr int kTcKeys = 16;  // keys per tile
constexpr float kTcRescaleLog2 = 8.0f;

template <int kD, int kWarps = kTcDecodeWarps>
struct TcPartials {
  float m[kWarps][kTcHeads], l[kWarps][kTcHeads];
  float acc[kWarps][kTcHeads][kD];
};

// The block's task and this warp's tiles: tile t holds keys warp_first + t·tile_stride + 0..15
// of the query's visible keys, up to `last` (tile_stride: 16 keys per warp of the block). Built
// from the step's host-uploaded tables only (query_start, context_len, the block table): it may run
// before wait_prior_grid().
struct TcDecodeTask {
  int r, kvh, part, h0, heads, q0;
  int first, last;
  int warp_first, tiles, tile_stride;
  bool active;
  VisibleKeys keys;

  __device__ explicit TcDecodeTask(const AttnArgs& a) : keys(0, 0, 0) {
    const int G = a.q_heads / a.kv_heads, head_groups = (G + kTcHeads - 1) / kTcHeads;
    r = static_cast<int>(blockIdx.x) / (a.kv_heads * head_groups);
    kvh = static_cast<int>(blockIdx.x) / head_groups % a.kv_heads;
    const int hg = static_cast<int>(blockIdx.x) % head_groups;
    h0 = kvh * G + hg * kTcHeads;
    heads = min(kTcHeads, G - hg * kTcHeads);
    q0 = a.query_start[r];
    active = false;
    if (a.query_start[r + 1] - q0 != 1 || !query_wanted(a, a.context_len[r] - 1)) return;
    keys = VisibleKeys(a.context_len[r] - 1, a.window, a.sink_tokens);
    const int split = a.split_rule.split(keys.count);
    part = static_cast<int>(blockIdx.y);
    first = part * split;
    if (first >= keys.count) return;  // this query has fewer parts
    last = min(keys.count, first + split);
    active = true;
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    tile_stride = static_cast<int>(blockDim.x >> 5) * kTcKeys;
    warp_first = first + warp * kTcKeys;
    tiles = warp_first < last ? (last - warp_first + tile_stride - 1) / tile_stride : 0;
  }

  // Row (slot · kv_heads + kv head) of visible key `i`, -1 at or past `last`.
  __device__ __forceinline__ int row(const AttnArgs& a, int i) const {
    if (i >= last) return -1;
    const int p = keys.position(i);
    const int32_t* table = a.block_table + static_cast<int64_t>(r) * a.max_blocks;
    const int64_t slot = kv_slot(a, table, p);
    return static_cast<int>(slot * a.kv_heads + kvh);
  }
  __device__ __forceinline__ int tile_start(int t) const { return warp_first + t * tile_stride; }
  // Whether tile t holds only keys older than the query's own: the step writes none of them (the
  // query's own K/V is this step's write), so they may be read before wait_prior_grid().
  __device__ __forceinline__ bool settled(int t) const {
    return tile_start(t) + kTcKeys < keys.count;
  }
};

// Q as the A operand, rows = heads (rows g + 8 are zero), scaled by scale·log2(e) (scale alone
// when soft-capped) and rounded to T: k-step s holds dims q_dim(s, 0) (+1) in qf[s][0] and
// q_dim(s, 1) (+1) in qf[s][1] of head g — the K fragments must hold the same dims.
template <typename T, int kD, typename QDims>
__device__ __forceinline__ void load_q_fragments(const AttnArgs& a, const TcDecodeTask& task, int g,
                                                 QDims q_dim, uint32_t (&qf)[kD / 16][2]) {
  const float q_scale = a.softcap > 0.0f ? a.scale : a.scale * kLog2e;
  const float* qrow = a.q + (static_cast<int64_t>(task.q0) * a.q_heads + task.h0 + g) * kD;
  const bool valid = g < task.heads;
#pragma unroll
  for (int s = 0; s < kD / 16; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 x =
          valid ? *reinterpret_cast<const float2*>(qrow + q_dim(s, h)) : make_float2(0, 0);
      qf[s][h] = pack2<T>(x.x * q_scale, x.y * q_scale);
    }
  }
}

// S = Q·Kᵀ for one n-tile of 8 keys: k-step s's B fragment is (b[s][0], b[s][1]).
template <typename T, int kD>
__device__ __forceinline__ void tc_scores(const uint32_t (&qf)[kD / 16][2], int s, uint32_t b0,
                                          uint32_t b1, float (&acc)[4]) {
  const uint32_t a[4] = {qf[s][0], 0u, qf[s][1], 0u};
  mma16816<T>(acc, a, b0, b1);
}

// The block's result for its part: the warps merge in shared memory in warp order
// (weight_w = 2^(m_w − m_all), 0 for a warp without keys) and write (m, l, acc) per head for
// decode_merge_kernel, m in natural units. store_ml(m_row, l_row) puts this warp's m and
// l of each head into m_row[head], l_row[head] (some lane per head); o_dim(i, h): the dim of the
// Oᵀ m-tile i's row g (h = 0) or g + 8 (h = 1), whose columns are heads 2c, 2c + 1. Ends with the
// block's shared memory reused: call after every warp is done with its tiles. kDirect: the kernel
// may take AttnArgs::direct_out — the 16-bit kernels only: the branch cost the TurboQuant k8v3
// kernel a spill and the affine kernels at their register cap more spilled bytes.
template <int kD, int kWarps, bool kDirect, typename StoreMl, typename ODims>
__device__ __forceinline__ void tc_write_partials(const AttnArgs& a, const TcDecodeTask& task,
                                                  unsigned char* smem, const float (&o)[kD / 16][4],
                                                  StoreMl store_ml, ODims o_dim) {
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int c = lane & 3;
  __syncthreads();  // every warp is done with its stages: the partials reuse the memory
  auto& sh = *reinterpret_cast<TcPartials<kD, kWarps>*>(smem);
  store_ml(sh.m[warp], sh.l[warp]);
#pragma unroll
  for (int i = 0; i < kD / 16; ++i) {
    sh.acc[warp][2 * c][o_dim(i, 0)] = o[i][0];
    sh.acc[warp][2 * c + 1][o_dim(i, 0)] = o[i][1];
    sh.acc[warp][2 * c][o_dim(i, 1)] = o[i][2];
    sh.acc[warp][2 * c + 1][o_dim(i, 1)] = o[i][3];
  }
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < task.heads * kD; e += 32 * kWarps) {
    const int hh = e / kD, d = e % kD;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, sh.m[w][hh]);
    float l_all = 0.0f, out = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float weight = exp2f(sh.m[w][hh] - m_all);
      l_all += sh.l[w][hh] * weight;
      out += sh.acc[w][hh][d] * weight;
    }
    if (kDirect && a.direct_out) {
      // The only part: merge_head's arithmetic on it — its weight expf(m − m) of the m the
      // partials would hold, its sums from +0, one division — so the merge kernel's bits.
      // The row's query read again here: task.q0 kept live through the tile loop cost the
      // TurboQuant kernel a spill.
      const int64_t out_row =
          static_cast<int64_t>(a.query_start[task.r]) * a.q_heads + task.h0 + hh;
      // __fmul_rn / __fsub_rn: never contracted into an FMA (which would give the product's
      // rounding error instead of 0).
      const float m_stored = __fmul_rn(m_all, kLn2);
      const float weight = expf(__fsub_rn(m_stored, m_stored));
      store_output(a, out_row * a.head_dim + d, (0.0f + out * weight) / (0.0f + l_all * weight));
      continue;
    }
    const int64_t slot =
        (static_cast<int64_t>(task.r) * a.q_heads + task.h0 + hh) * a.max_parts + task.part;
    if (d == 0) {
      a.part_ml[2 * slot] = m_all * kLn2;
      a.part_ml[2 * slot + 1] = l_all;
    }
    a.part_acc[slot * kD + d] = out;
  }
  if ((kDirect && a.direct_out) || a.merge_tickets == nullptr) return;
  // The last of the task's parts to get here merges them (threadFenceReduction's pattern: each
  // thread's partials are visible device-wide before the block takes its ticket).
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int parts = a.split_rule.parts(task.keys.count);
    last = atomicAdd(&a.merge_tickets[blockIdx.x], 1) == parts - 1;
    if (last) a.merge_tickets[blockIdx.x] = 0;  // every other part has taken its ticket
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  merge_heads<kD, 32 * kWarps>(a, task.r, task.h0, task.heads);
}

// The online softmax of one warp: Oᵀ fragments (m-tile i: o[i][0], o[i][1] = heads 2c, 2c + 1 of
// the m-tile's row g; o[i][2], o[i][3] = of row g + 8; which dims those rows are is the kernel's),
// and head g's m and l (l: this lane's share of the sum).
template <typename T, int kD>
struct TcOnlineSoftmax {
  static constexpr int kSteps = kD / 16;
  float o[kSteps][4];
  float m = -INFINITY, l = 0.0f;

  __device__ __forceinline__ TcOnlineSoftmax() {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  }

  // s: S of the tile's two n-tiles (s[n][0], s[n][1] = head g, keys 8n + 2c, 8n + 2c + 1 of the
  // tile starting at visible key i0). Moves m when needed and returns Pᵀ as the B operand of
  // Oᵀ += Vᵀ·Pᵀ (16 keys × 8 heads: keys 2c, 2c + 1 in b[0] and 2c + 8, 2c + 9 in b[1], head g).
  __device__ __forceinline__ void probabilities(const AttnArgs& a, const float (&s)[2][4], int i0,
                                                int last, int c, uint32_t (&b)[2]) {
    const bool capped = a.softcap > 0.0f;
    float x[4] = {s[0][0], s[0][1], s[1][0], s[1][1]};
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (capped) x[j] = a.softcap * tanhf(x[j] / a.softcap) * kLog2e;
      const int key = i0 + 8 * (j >> 1) + 2 * c + (j & 1);
      x[j] = key < last ? x[j] : -INFINITY;
      tile_max = fmaxf(tile_max, x[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
    // Lazy rescaling: (m, l, Oᵀ) mean l = Σ 2^(t − m), O = Σ 2^(t − m)·v throughout; the weights
    // stay ≤ 2^kTcRescaleLog2 between moves. The first tile always moves m (m = -inf).
    const bool move = tile_max > m + kTcRescaleLog2;
    if (__any_sync(kFullMask, move)) {
      const float m_new = move ? tile_max : m;
      const float corr = exp2f(m - m_new);  // 0 on the first move, 1 for heads that stay
      m = m_new;
      l *= corr;
      // Oᵀ columns are heads 2c and 2c + 1: their factors live on lanes 8c and 8c + 4.
      const float corr_even = __shfl_sync(kFullMask, corr, 8 * c);
      const float corr_odd = __shfl_sync(kFullMask, corr, 8 * c + 4);
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        o[i][0] *= corr_even;
        o[i][1] *= corr_odd;
        o[i][2] *= corr_even;
        o[i][3] *= corr_odd;
      }
    }
    float p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      p[j] = exp2f(x[j] - m);
      l += p[j];
    }
    b[0] = pack2<T>(p[0], p[1]);
    b[1] = pack2<T>(p[2], p[3]);
  }

  // The block's partials (tc_write_partials; kWarps: the block's, kDirect: whether it may write
  // the outputs instead): head g's m and l from lane (g, 0).
  template <int kWarps, bool kDirect, typename ODims>
  __device__ __forceinline__ void write_partials(const AttnArgs& a, const TcDecodeTask& task,
                                                 unsigned char* smem, ODims o_dim) {
    const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, c = lane & 3;
    l += __shfl_xor_sync(kFullMask, l, 1);
    l += __shfl_xor_sync(kFullMask, l, 2);
    tc_write_partials<kD, kWarps, kDirect>(
        a, task, smem, o,
        [&](float* m_row, float* l_row) {
          if (c == 0) {
            m_row[g] = m;
            l_row[g] = l;
          }
        },
        o_dim);
  }
};

// The online softmax when S is computed transposed (Sᵀ = K·Qᵀ: the tile's 16 keys are the mma's
// rows, the heads its columns, as in Oᵀ): lane (g, c) holds the scores of keys g and g + 8 for
// heads 2c and 2c + 1 — the heads of its Oᵀ columns, so a rescale needs no shuffles — and those
// heads' m and l (l: this lane's share). Same arithmetic as TcOnlineSoftmax otherwise.
template <typename T, int kD>
struct TcHeadColumnsSoftmax {
  static constexpr int kSteps = kD / 16;
  float o[kSteps][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  __device__ __forceinline__ TcHeadColumnsSoftmax() {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  }

  // st: Sᵀ of the tile starting at visible key i0 (st[0], st[1] = key g, heads 2c, 2c + 1;
  // st[2], st[3] = key g + 8). Moves m when needed and returns Pᵀ as the B operand of
  // Oᵀ += Vᵀ·Pᵀ (keys 2c, 2c + 1 of head g in b[0], keys 2c + 8, 2c + 9 in b[1]): the transposes
  // (movmatrix) of the two 8×8 blocks keys × heads this lane holds a row of.
  __device__ __forceinline__ void probabilities(const AttnArgs& a, const float (&st)[4], int i0,
                                                int last, int g, uint32_t (&b)[2]) {
    const bool capped = a.softcap > 0.0f;
    float x[4] = {st[0], st[1], st[2], st[3]};
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (capped) x[j] = a.softcap * tanhf(x[j] / a.softcap) * kLog2e;
      const int key = i0 + g + 8 * (j >> 1);
      x[j] = key < last ? x[j] : -INFINITY;
      tile_max[j & 1] = fmaxf(tile_max[j & 1], x[j]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int offset = 4; offset < 32; offset <<= 1)
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], offset));
    }
    // Lazy rescaling as TcOnlineSoftmax (the first tile always moves m).
    const bool move0 = tile_max[0] > m[0] + kTcRescaleLog2;
    const bool move1 = tile_max[1] > m[1] + kTcRescaleLog2;
    if (__any_sync(kFullMask, move0 || move1)) {
      float corr[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = (h == 0 ? move0 : move1) ? tile_max[h] : m[h];
        corr[h] = exp2f(m[h] - m_new);  // 0 on the first move, 1 for heads that stay
        m[h] = m_new;
        l[h] *= corr[h];
      }
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        o[i][0] *= corr[0];
        o[i][1] *= corr[1];
        o[i][2] *= corr[0];
        o[i][3] *= corr[1];
      }
    }
    float p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      p[j] = exp2f(x[j] - m[j & 1]);
      l[j & 1] += p[j];
    }
    b[0] = movmatrix_trans(pack2<T>(p[0], p[1]));
    b[1] = movmatrix_trans(pack2<T>(p[2], p[3]));
  }

  // The block's partials (tc_write_partials; kWarps: the block's): heads 2c, 2c + 1's m and l
  // from lane (0, c).
  template <int kWarps, typename ODims>
  __device__ __forceinline__ void write_partials(const AttnArgs& a, const TcDecodeTask& task,
                                                 unsigned char* smem, ODims o_dim) {
    const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int offset = 4; offset < 32; offset <<= 1)
        l[h] += __shfl_xor_sync(kFullMask, l[h], offset);
    }
    tc_write_partials<kD, kWarps, false>(
        a, task, smem, o,
        [&](float* m_row, float* l_row) {
          if (g == 0) {
            m_row[2 * c] = m[0];
            m_row[2 * c + 1] = m[1];
            l_row[2 * c] = l[0];
            l_row[2 * c + 1] = l[1];
          }
        },
        o_dim);
  }
};

// Grid of the decode kernels: (rows · kv heads · head groups, max_parts); blocks of four warps,
// or eight where AttnArgs::decode_warps applies (the launchers choose).
inline dim3 tc_decode_grid(const AttnArgs& args) {
  const int group = args.q_heads / args.kv_heads;
  const int head_groups = (group + kTcHeads - 1) / kTcHeads;
  return dim3(static_cast<unsigned>(args.num_rows * args.kv_heads * head_groups),
              static_cast<unsigned>(args.max_parts));
}

// Blocks per SM a decode kernel's registers are bounded to at kWarps warps a block: as many warps
// per SM as kMinBlocksAtFour blocks of four (at least one block).
template <int kMinBlocksAtFour, int kWarps>
constexpr int tc_min_blocks() {
  constexpr int blocks = kMinBlocksAtFour * kTcDecodeWarps / kWarps;
  return blocks > 0 ? blocks : 1;
}

// Launches decode kernel kKernel (blocks of kWarps warps, kSmem bytes of dynamic shared memory,
// its attribute set on the first launch) over tc_decode_grid(args).
template <auto kKernel, int kWarps, size_t kSmem, typename Source>
void launch_tc_decode(const AttnArgs& args, const Source& source, cudaStream_t stream,
                      const char* name) {
  static const bool configured = [] {
    RINGLM_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmem)));
    return true;
  }();
  (void)configured;
  launch_pdl(kKernel, tc_decode_grid(args), dim3(32 * kWarps), kSmem, stream, args, source);
  check_launch(name);
}

}  // namespace ringlm::cuda::device
