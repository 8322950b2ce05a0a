// Decode attention (rows with one query) on tensor cores, split-K: one block of four warps per
// (row, kv head, group of up to 8 of its query heads, part). The query heads are the rows of the
// mma (padded to 16), so each K/V tile is read once for all of them.
//
// Each warp walks its own 16-key tiles of the part (tiles warp, warp + 4, ...). A tile's K and V
// rows land in the warp's shared-memory stage as 16-bit values: 16-bit dense formats by cp.async
// two tiles ahead of use, quantized formats decoded by their reader (device/kv_readers.cuh) and
// rounded to bf16. Per tile:
//   S = Q·Kᵀ  (16 heads × 16 keys; Q = q·scale·log2(e) rounded to the tile dtype),
//   P = 2^(S − m) with m moved only when a score passes it by kRescaleLog2 (lazy rescaling),
//   Oᵀ += Vᵀ·Pᵀ (dims × 8 heads; V through ldmatrix.trans, P rounded to the tile dtype).
// The S accumulator's rows for heads 0..7 are exactly Pᵀ's B fragment (keys 2c, 2c + 1, 2c + 8,
// 2c + 9 of head g), so P never leaves registers. The warps merge in shared memory in warp order
// and the block writes its part's (m, l, acc) per head for grouped_decode_merge_kernel.
// Every operation depends only on the row's own keys (decode_split is per row): a row's bits are
// the same alone or batched.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::device {

constexpr int kTcDecodeWarps = 4, kTcDecodeThreads = 32 * kTcDecodeWarps;
constexpr int kTcKeys = 16;   // keys per tile
constexpr int kTcStages = 2;  // tiles in shared memory per warp
constexpr int kTcHeads = 8;   // query heads per block (the mma's N of Oᵀ)
constexpr float kTcRescaleLog2 = 8.0f;

// Head dims this kernel serves (any GQA ratio; formats: tc_decode_reader).
inline bool decode_tc_supported(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// Readers whose K/V the kernel reads: 16-bit dense (copied as is) and quantized formats
// (decoded to bf16). f32 K/V keep the CUDA-core kernel (no rounding of stored values).
template <typename Kv>
constexpr bool tc_decode_reader() {
  if constexpr (requires { typename Kv::Element; }) {
    return sizeof(typename Kv::Element) == 2;
  } else {
    return true;
  }
}

// The tile dtype: the K/V dtype for dense formats, bf16 for quantized ones.
template <typename Kv>
struct TcTileType {
  using type = __nv_bfloat16;
};
template <typename Kv>
requires requires {
  typename Kv::Element;
}
struct TcTileType<Kv> {
  using type = typename Kv::Element;
};

template <typename T, int kD>
struct TcTile {
  static constexpr int kStride = kD + 8;  // padded rows: conflict-free ldmatrix
  T k[kTcKeys][kStride];
  T v[kTcKeys][kStride];
};

template <int kD>
struct TcPartials {
  float m[kTcDecodeWarps][kTcHeads], l[kTcDecodeWarps][kTcHeads];
  float acc[kTcDecodeWarps][kTcHeads][kD];
};

template <typename T, int kD>
constexpr size_t tc_decode_smem_bytes() {
  const size_t tiles = sizeof(TcTile<T, kD>) * kTcStages * kTcDecodeWarps;
  return tiles > sizeof(TcPartials<kD>) ? tiles : sizeof(TcPartials<kD>);
}

// Fills a tile's K and V rows. my_row: lane j (mod 16) holds key j's (slot · kv_heads + kv head),
// or -1 past the part's end (zeros are written).
template <typename Kv, int kD>
__device__ __forceinline__ void fill_tile(const Kv& kv,
                                          TcTile<typename TcTileType<Kv>::type, kD>& t, int my_row,
                                          int lane) {
  using T = typename TcTileType<Kv>::type;
  constexpr int kChunks = kD / 8;  // 8 dims (16 bytes of tile) per chunk
  constexpr int kRowsPerPass = 32 / kChunks;
  const int chunk = lane % kChunks, d0 = 8 * chunk;
#pragma unroll
  for (int j = 0; j < kTcKeys / kRowsPerPass; ++j) {
    const int key = j * kRowsPerPass + lane / kChunks;
    const int row = __shfl_sync(kFullMask, my_row, key);
    const bool valid = row >= 0;
    if constexpr (requires { typename Kv::Element; }) {
      const int64_t off = static_cast<int64_t>(valid ? row : 0) * kD + d0;
      cp_async16(&t.k[key][d0], kv.k + off, valid);
      cp_async16(&t.v[key][d0], kv.v + off, valid);
    } else {
      float kx[8] = {}, vx[8] = {};
      if (valid) {
        kv.template key<8>(row, d0, kx);
        kv.template value<8>(row, d0, vx);
      }
      *reinterpret_cast<uint4*>(&t.k[key][d0]) =
          make_uint4(pack2<T>(kx[0], kx[1]), pack2<T>(kx[2], kx[3]), pack2<T>(kx[4], kx[5]),
                     pack2<T>(kx[6], kx[7]));
      *reinterpret_cast<uint4*>(&t.v[key][d0]) =
          make_uint4(pack2<T>(vx[0], vx[1]), pack2<T>(vx[2], vx[3]), pack2<T>(vx[4], vx[5]),
                     pack2<T>(vx[6], vx[7]));
    }
  }
}

template <typename Kv, int kD>
__global__ void __launch_bounds__(kTcDecodeThreads)
    decode_tc_kernel(const AttnArgs a, const Kv kv) {
  using T = typename TcTileType<Kv>::type;
  constexpr int kSteps = kD / 16;  // k-steps of Q·Kᵀ, m-tiles of Oᵀ
  extern __shared__ __align__(16) unsigned char smem[];
  const int G = a.q_heads / a.kv_heads, head_groups = (G + kTcHeads - 1) / kTcHeads;
  const int r = static_cast<int>(blockIdx.x) / (a.kv_heads * head_groups);
  const int kvh = static_cast<int>(blockIdx.x) / head_groups % a.kv_heads;
  const int hg = static_cast<int>(blockIdx.x) % head_groups;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1) return;
  const VisibleKeys keys(a.context_len[r] - 1, a.window, a.sink_tokens);
  const int split = decode_split(keys.count);
  const int part = static_cast<int>(blockIdx.y);
  const int first = part * split;
  if (first >= keys.count) return;  // this query has fewer parts
  const int last = min(keys.count, first + split);

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;  // mma fragment coordinates
  const int h0 = kvh * G + hg * kTcHeads, heads = min(kTcHeads, G - hg * kTcHeads);

  // Q as the A operand, rows = heads (rows g + 8 are zero): k-step s holds dims 16s + 2c (+1)
  // and 16s + 8 + 2c (+1) of head g.
  const bool capped = a.softcap > 0.0f;
  const float q_scale = capped ? a.scale : a.scale * kLog2e;
  uint32_t qf[kSteps][2];
  {
    const float* qrow = a.q + (static_cast<int64_t>(q0) * a.q_heads + h0 + g) * kD;
    const bool valid = g < heads;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int col = 16 * s + 2 * c;
      const float2 x0 = valid ? *reinterpret_cast<const float2*>(qrow + col) : make_float2(0, 0);
      const float2 x1 =
          valid ? *reinterpret_cast<const float2*>(qrow + col + 8) : make_float2(0, 0);
      qf[s][0] = pack2<T>(x0.x * q_scale, x0.y * q_scale);
      qf[s][1] = pack2<T>(x1.x * q_scale, x1.y * q_scale);
    }
  }

  // Oᵀ fragments: m-tile i holds dims 16i + g (o[i][0], o[i][1]) and 16i + 8 + g (o[i][2],
  // o[i][3]) of heads 2c and 2c + 1. m and l are head g's (l: this lane's share of the sum).
  float o[kSteps][4];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  auto* stages = reinterpret_cast<TcTile<T, kD>*>(smem) + warp * kTcStages;
  const int32_t* table = a.block_table + static_cast<int64_t>(r) * a.max_blocks;
  const int tile_stride = kTcDecodeWarps * kTcKeys;
  const int warp_first = first + warp * kTcKeys;
  const int tiles = warp_first < last ? (last - warp_first + tile_stride - 1) / tile_stride : 0;
  auto load = [&](int t) {
    const int i = warp_first + t * tile_stride + (lane & (kTcKeys - 1));
    int row = -1;
    if (i < last) {
      const int p = keys.position(i);
      const int64_t slot =
          static_cast<int64_t>(table[p / a.block_tokens]) * a.block_tokens + p % a.block_tokens;
      row = static_cast<int>(slot * a.kv_heads + kvh);
    }
    fill_tile<Kv, kD>(kv, stages[t % kTcStages], row, lane);
  };

  const int mi = lane >> 3, mj = lane & 7;  // ldmatrix: the matrix and row this lane addresses
  if (tiles > 0) load(0);
  cp_async_commit();
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) load(t + 1);
    cp_async_commit();
    cp_async_wait<1>();  // tile t has landed (this lane's copies) ...
    __syncwarp();        // ... and every lane's
    const TcTile<T, kD>& tile = stages[t % kTcStages];
    const int i0 = warp_first + t * tile_stride;

    // S = Q·Kᵀ, two n-tiles of 8 keys: s[n][0], s[n][1] = head g, keys 8n + 2c, 8n + 2c + 1.
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int s2 = 0; s2 < kD / 32; ++s2) {
        uint32_t b[4];
        ldmatrix_x4(b, &tile.k[8 * n + mj][32 * s2 + 8 * mi]);
        const uint32_t a0[4] = {qf[2 * s2][0], 0u, qf[2 * s2][1], 0u};
        const uint32_t a1[4] = {qf[2 * s2 + 1][0], 0u, qf[2 * s2 + 1][1], 0u};
        mma16816<T>(s[n], a0, b[0], b[1]);
        mma16816<T>(s[n], a1, b[2], b[3]);
      }
    }
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
    // Pᵀ as the B operand (16 keys × 8 heads): keys 2c, 2c + 1 and 2c + 8, 2c + 9 of head g.
    const uint32_t b0 = pack2<T>(p[0], p[1]), b1 = pack2<T>(p[2], p[3]);
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      uint32_t av[4];  // Vᵀ rows 16i .. 16i + 15 (dims) × the 16 keys
      ldmatrix_x4_trans(av, &tile.v[8 * (mi >> 1) + mj][16 * i + 8 * (mi & 1)]);
      mma16816<T>(o[i], av, b0, b1);
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
  }
  cp_async_wait<0>();
  l += __shfl_xor_sync(kFullMask, l, 1);
  l += __shfl_xor_sync(kFullMask, l, 2);

  __syncthreads();  // every warp is done with its stages: the partials reuse the memory
  auto& sh = *reinterpret_cast<TcPartials<kD>*>(smem);
  if (c == 0) {
    sh.m[warp][g] = m;
    sh.l[warp][g] = l;
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    sh.acc[warp][2 * c][16 * i + g] = o[i][0];
    sh.acc[warp][2 * c + 1][16 * i + g] = o[i][1];
    sh.acc[warp][2 * c][16 * i + 8 + g] = o[i][2];
    sh.acc[warp][2 * c + 1][16 * i + 8 + g] = o[i][3];
  }
  __syncthreads();

  // The warps' merge, in warp order: weight_w = 2^(m_w − m_all) (0 for a warp without keys).
  // The part's m is written in natural units (grouped_decode_merge_kernel's).
  for (int e = static_cast<int>(threadIdx.x); e < heads * kD; e += kTcDecodeThreads) {
    const int hh = e / kD, d = e % kD;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kTcDecodeWarps; ++w) m_all = fmaxf(m_all, sh.m[w][hh]);
    float l_all = 0.0f, out = 0.0f;
#pragma unroll
    for (int w = 0; w < kTcDecodeWarps; ++w) {
      const float weight = exp2f(sh.m[w][hh] - m_all);
      l_all += sh.l[w][hh] * weight;
      out += sh.acc[w][hh][d] * weight;
    }
    const int64_t slot = (static_cast<int64_t>(r) * a.q_heads + h0 + hh) * a.max_parts + part;
    if (d == 0) {
      a.part_ml[2 * slot] = m_all * kLn2;
      a.part_ml[2 * slot + 1] = l_all;
    }
    a.part_acc[slot * kD + d] = out;
  }
}

template <typename Kv, int kD>
void launch_decode_tc_dim(const AttnArgs& args, const Kv& kv, cudaStream_t stream) {
  using T = typename TcTileType<Kv>::type;
  constexpr size_t kSmem = tc_decode_smem_bytes<T, kD>();
  static const bool configured = [] {
    RINGLM_CUDA_CHECK(cudaFuncSetAttribute(decode_tc_kernel<Kv, kD>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmem)));
    return true;
  }();
  (void)configured;
  const int group = args.q_heads / args.kv_heads;
  const int head_groups = (group + kTcHeads - 1) / kTcHeads;
  const dim3 grid(static_cast<unsigned>(args.num_rows * args.kv_heads * head_groups),
                  static_cast<unsigned>(args.max_parts));
  decode_tc_kernel<Kv, kD><<<grid, kTcDecodeThreads, kSmem, stream>>>(args, kv);
  check_launch("decode_tc_kernel");
}

// The decode rows of a step (decode_tc_supported(head_dim) and tc_decode_reader<Kv>() must hold;
// args.part_ml/part_acc hold num_rows · q_heads · max_parts partials); the merge is the caller's.
template <typename Kv>
void launch_decode_tc(const AttnArgs& args, const Kv& kv, cudaStream_t stream) {
  switch (args.head_dim) {
    case 64:
      launch_decode_tc_dim<Kv, 64>(args, kv, stream);
      break;
    case 128:
      launch_decode_tc_dim<Kv, 128>(args, kv, stream);
      break;
    default:
      launch_decode_tc_dim<Kv, 256>(args, kv, stream);
      break;
  }
}

}  // namespace ringlm::cuda::device
