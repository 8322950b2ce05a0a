// Prefill attention on tensor cores (rows with several queries, head_dim 64/128/256, bf16/f16 K/V
// and the quantized formats), FlashAttention-2 style with mma.sync m16n8k16 (16-bit inputs, f32
// accumulation).
//
// A block serves 16 consecutive queries of one row and one kv head; warp w serves query head
// kv_head·kG + w (GQA: the kG warps share each K/V tile in shared memory). The block walks the
// tile's visible keys (the sinks, then the window or everything up to its last query) in tiles of
// 32: K and V rows are gathered through the block table into shared memory (16-bit K/V as
// stored; quantized K/V decoded by the format's reader to f32 and rounded to bf16, as the
// decode kernel's ReaderTiles do — TurboQuant values stay rotated, the caller un-rotates the
// output), then each warp
// computes S = Q·Kᵀ (16 × 32), masks it per (query, key) (causal, window, sinks), updates its
// running max / sum in log2 units and accumulates O += P·V (P rounded to the K/V dtype).
// Precision: q·scale and P are rounded to the K/V dtype (bf16: 2^-8 relative), products
// accumulate in f32. Each query's result depends only on its row (fixed tiles from the row start).
// Registers (ptxas, sm_90a): 96-171 at head_dim 64/128; 255 at 256 (Q fragments and O take 192),
// with 8 bytes of spills for the quantized readers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::device {

constexpr int kPrefillQueries = 16, kPrefillKeys = 32;

inline bool prefill_tc_supported(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) &&
         (group == 1 || group == 2 || group == 4 || group == 8);
}

// The prefill tile of block b: rows with several queries are cut into tiles of 16 queries from
// their start; tiles are numbered row by row. Returns false past the last tile.
__device__ __forceinline__ bool find_prefill_tile(const AttnArgs& a, int b, int& row, int& tile) {
  int before = 0;
  for (int r = 0; r < a.num_rows; ++r) {
    const int n = a.query_start[r + 1] - a.query_start[r];
    if (n < 2) continue;  // decode rows (and empty ones) go elsewhere
    const int tiles = (n + kPrefillQueries - 1) / kPrefillQueries;
    if (b < before + tiles) {
      row = r;
      tile = b - before;
      return true;
    }
    before += tiles;
  }
  return false;
}

template <typename T, int kD>
struct PrefillShared {
  static constexpr int kStride = kD + 8;  // padded rows: conflict-free fragment loads
  T k[kPrefillKeys][kStride];
  T v[kPrefillKeys][kStride];
  int pos[kPrefillKeys];  // key positions of the tile (INT32_MAX past the end)
};

// The tile dtype for a reader: 16-bit dense K/V as stored, bf16 for the quantized formats.
template <typename Kv>
struct PrefillTileType {
  using T = __nv_bfloat16;
};
template <typename E>
struct PrefillTileType<DenseKvReader<E>> {
  using T = E;
};

// Key j's dims [d0, d0 + 8) of K and V (row = slot · kv_heads + kv head) into the tile's rows.
template <typename Kv, typename T>
__device__ __forceinline__ void load_prefill_chunk(const Kv& kv, int64_t row, int d0, T* k_dst,
                                                   T* v_dst) {
  if constexpr (dense_reader<Kv>()) {
    const int64_t off = row * kv.head_dim + d0;
    *reinterpret_cast<uint4*>(k_dst) = *reinterpret_cast<const uint4*>(kv.k + off);
    *reinterpret_cast<uint4*>(v_dst) = *reinterpret_cast<const uint4*>(kv.v + off);
  } else {
    float kx[8], vx[8];
    kv.template key<8>(row, d0, kx);
    kv.template value<8>(row, d0, vx);
    *reinterpret_cast<uint4*>(k_dst) = pack8<T>(kx);
    *reinterpret_cast<uint4*>(v_dst) = pack8<T>(vx);
  }
}

template <typename Kv, int kD, int kG>
__global__ void __launch_bounds__(kG * 32) prefill_tc_kernel(const AttnArgs a, const Kv kv) {
  using T = typename PrefillTileType<Kv>::T;
  constexpr int kSteps = kD / 16;  // k-steps of Q·Kᵀ
  constexpr int kDimTiles = kD / 8;
  __shared__ __align__(16) PrefillShared<T, kD> sh;
  int r = 0, tile = 0;
  if (!find_prefill_tile(a, static_cast<int>(blockIdx.x), r, tile)) return;
  const int kvh = static_cast<int>(blockIdx.y);
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int h = kvh * kG + warp;
  const int q0 = a.query_start[r], n = a.query_start[r + 1] - q0;
  const int t0 = q0 + tile * kPrefillQueries;  // first query token of the tile
  const int nq = min(kPrefillQueries, n - tile * kPrefillQueries);
  const int p0 = a.context_len[r] - n + tile * kPrefillQueries;  // its position
  const int p_last = p0 + nq - 1;
  if (p_last < a.query_pos_begin || p0 >= a.query_pos_end) return;  // no query of the tile wanted
  const int g = lane >> 2, c = lane & 3;                            // mma fragment coordinates

  // The keys any wanted query of the tile (positions [p_first, p_end]) sees: sinks [0, sinks),
  // then [lo, p_end]. Keys past the last wanted query may not exist in this view (a bf16
  // companion stops at --kv-quant-start), so they are never read.
  const int p_first = max(p0, a.query_pos_begin), p_end = min(p_last, a.query_pos_end - 1);
  int sinks = 0, lo = 0;
  if (a.window > 0) {
    sinks = min(a.sink_tokens, p_end + 1);
    lo = max(p_first - a.window + 1, sinks);
  }
  const int count = sinks + (p_end - lo + 1);

  // Q fragments (rows g, g + 8 of the tile; columns 16·s + 2c (+1), + 8), scaled and rounded.
  const bool capped = a.softcap > 0.0f;
  const float q_scale = capped ? a.scale : a.scale * kLog2e;
  uint32_t qf[kSteps][4];
  {
    const float* qa = a.q + (static_cast<int64_t>(t0 + g) * a.q_heads + h) * kD;
    const float* qb = a.q + (static_cast<int64_t>(t0 + g + 8) * a.q_heads + h) * kD;
    const bool va = g < nq, vb = g + 8 < nq;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int col = 16 * s + 2 * c;
      float2 a0 = va ? *reinterpret_cast<const float2*>(qa + col) : make_float2(0, 0);
      float2 a1 = vb ? *reinterpret_cast<const float2*>(qb + col) : make_float2(0, 0);
      float2 a2 = va ? *reinterpret_cast<const float2*>(qa + col + 8) : make_float2(0, 0);
      float2 a3 = vb ? *reinterpret_cast<const float2*>(qb + col + 8) : make_float2(0, 0);
      qf[s][0] = pack2<T>(a0.x * q_scale, a0.y * q_scale);
      qf[s][1] = pack2<T>(a1.x * q_scale, a1.y * q_scale);
      qf[s][2] = pack2<T>(a2.x * q_scale, a2.y * q_scale);
      qf[s][3] = pack2<T>(a3.x * q_scale, a3.y * q_scale);
    }
  }

  float o[kDimTiles][4];
#pragma unroll
  for (int d = 0; d < kDimTiles; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;  // rows g and g + 8
  const int pos_a = p0 + g, pos_b = p0 + g + 8;
  const int32_t* table = a.block_table + static_cast<int64_t>(r) * a.max_blocks;
  constexpr int kChunksPerRow = kD / 8;  // 16-byte chunks

  for (int i0 = 0; i0 < count; i0 += kPrefillKeys) {
    __syncthreads();  // the previous tile is consumed
    for (int e = static_cast<int>(threadIdx.x); e < kPrefillKeys * kChunksPerRow; e += kG * 32) {
      const int j = e / kChunksPerRow, chunk = e % kChunksPerRow;
      const int i = i0 + j;
      int p = INT32_MAX;
      if (i < count) {
        p = i < sinks ? i : lo + (i - sinks);
        const int64_t slot = kv_slot(a, table, p);
        load_prefill_chunk(kv, slot * a.kv_heads + kvh, chunk * 8, &sh.k[j][chunk * 8],
                           &sh.v[j][chunk * 8]);
      } else {
        *reinterpret_cast<uint4*>(&sh.k[j][chunk * 8]) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(&sh.v[j][chunk * 8]) = make_uint4(0, 0, 0, 0);
      }
      if (chunk == 0) sh.pos[j] = p;
    }
    __syncthreads();

    // S = Q·Kᵀ: 4 tiles of 8 keys; element (row, key) of tile n sits at s[n][0..3] as
    // (g, 8n + 2c), (g, 8n + 2c + 1), (g + 8, 8n + 2c), (g + 8, 8n + 2c + 1).
    float s[kPrefillKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kPrefillKeys / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      const T* krow = &sh.k[8 * nt + g][2 * c];
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + 16 * st);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + 16 * st + 8);
        mma16816<T>(s[nt], qf[st], b0, b1);
      }
    }
    // Mask (causal, window, sinks), soft-cap, log2 units; row maxima over the quad.
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kPrefillKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key_pos = sh.pos[8 * nt + 2 * c + (e & 1)];
        const int q_pos = e < 2 ? pos_a : pos_b;
        const bool in_window = a.window == 0 || key_pos > q_pos - a.window;
        const bool visible = key_pos <= q_pos && (in_window || key_pos < a.sink_tokens) &&
                             (e < 2 ? g < nq : g + 8 < nq);
        float x = s[nt][e];
        if (capped) x = a.softcap * tanhf(x / a.softcap) * kLog2e;
        x = visible ? x : -INFINITY;
        s[nt][e] = x;
        if (e < 2) {
          mx_a = fmaxf(mx_a, x);
        } else {
          mx_b = fmaxf(mx_b, x);
        }
      }
    }
#pragma unroll
    for (int o_ = 1; o_ < 4; o_ <<= 1) {
      mx_a = fmaxf(mx_a, __shfl_xor_sync(kFullMask, mx_a, o_));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(kFullMask, mx_b, o_));
    }
    const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
    // A row with no visible key yet keeps m = -inf: use 0 as its reference (its p are all 0).
    const float ref_a = new_a == -INFINITY ? 0.0f : new_a;
    const float ref_b = new_b == -INFINITY ? 0.0f : new_b;
    const float corr_a = exp2f(m_a - ref_a), corr_b = exp2f(m_b - ref_b);
    m_a = new_a;
    m_b = new_b;
    l_a *= corr_a;
    l_b *= corr_b;
#pragma unroll
    for (int d = 0; d < kDimTiles; ++d) {
      o[d][0] *= corr_a;
      o[d][1] *= corr_a;
      o[d][2] *= corr_b;
      o[d][3] *= corr_b;
    }
    // P = 2^(S − m), as the A operand of P·V (two k-steps of 16 keys).
    uint32_t pf[2][4];
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      float p[2][4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int nt = 2 * kk + half;
        p[half][0] = exp2f(s[nt][0] - ref_a);
        p[half][1] = exp2f(s[nt][1] - ref_a);
        p[half][2] = exp2f(s[nt][2] - ref_b);
        p[half][3] = exp2f(s[nt][3] - ref_b);
        l_a += p[half][0] + p[half][1];
        l_b += p[half][2] + p[half][3];
      }
      pf[kk][0] = pack2<T>(p[0][0], p[0][1]);
      pf[kk][1] = pack2<T>(p[0][2], p[0][3]);
      pf[kk][2] = pack2<T>(p[1][0], p[1][1]);
      pf[kk][3] = pack2<T>(p[1][2], p[1][3]);
    }
    // O += P·V: V tiles of 16 keys × 16 dims through ldmatrix.trans (two n-tiles each).
    const int mi = lane >> 3, mj = lane & 7;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
      for (int d2 = 0; d2 < kD / 16; ++d2) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, &sh.v[16 * kk + (mi & 1) * 8 + mj][16 * d2 + (mi >> 1) * 8]);
        mma16816<T>(o[2 * d2], pf[kk], vb[0], vb[1]);
        mma16816<T>(o[2 * d2 + 1], pf[kk], vb[2], vb[3]);
      }
    }
  }

  // The quad's partial sums, then out = O / l for the tile's valid rows.
#pragma unroll
  for (int o_ = 1; o_ < 4; o_ <<= 1) {
    l_a += __shfl_xor_sync(kFullMask, l_a, o_);
    l_b += __shfl_xor_sync(kFullMask, l_b, o_);
  }
  float* out_a = a.out + (static_cast<int64_t>(t0 + g) * a.q_heads + h) * kD;
  float* out_b = a.out + (static_cast<int64_t>(t0 + g + 8) * a.q_heads + h) * kD;
#pragma unroll
  for (int d = 0; d < kDimTiles; ++d) {
    const int col = 8 * d + 2 * c;
    if (g < nq && query_wanted(a, pos_a))
      *reinterpret_cast<float2*>(out_a + col) = make_float2(o[d][0] / l_a, o[d][1] / l_a);
    if (g + 8 < nq && query_wanted(a, pos_b))
      *reinterpret_cast<float2*>(out_b + col) = make_float2(o[d][2] / l_b, o[d][3] / l_b);
  }
}

// The rows with several queries of a step (tensor_core_reader<Kv>() and prefill_tc_supported
// must hold).
template <typename Kv>
void launch_prefill_tc(const AttnArgs& args, const Kv& kv, int64_t tokens, cudaStream_t stream) {
  // Tiles: at most tokens / 16 + one partial tile per row.
  const dim3 grid(
      static_cast<unsigned>((tokens + kPrefillQueries - 1) / kPrefillQueries + args.num_rows),
      static_cast<unsigned>(args.kv_heads));
  const int group = args.q_heads / args.kv_heads;
  auto go = [&]<int kD>() {
    switch (group) {
      case 1:
        prefill_tc_kernel<Kv, kD, 1><<<grid, 32, 0, stream>>>(args, kv);
        break;
      case 2:
        prefill_tc_kernel<Kv, kD, 2><<<grid, 64, 0, stream>>>(args, kv);
        break;
      case 4:
        prefill_tc_kernel<Kv, kD, 4><<<grid, 128, 0, stream>>>(args, kv);
        break;
      default:
        prefill_tc_kernel<Kv, kD, 8><<<grid, 256, 0, stream>>>(args, kv);
        break;
    }
  };
  if (args.head_dim == 64) {
    go.template operator()<64>();
  } else if (args.head_dim == 128) {
    go.template operator()<128>();
  } else {
    go.template operator()<256>();
  }
  check_launch("prefill_tc_kernel");
}

}  // namespace ringlm::cuda::device
