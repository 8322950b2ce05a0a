// Decode attention (rows with one query) on tensor cores, split-K: one block of four warps per
// (row, kv head, group of up to 8 of its query heads, part). The query heads are the rows of the
// mma (padded to 16), so each K/V tile is read once for all of them.
//
// Each warp walks its own 16-key tiles of the part (tiles warp, warp + 4, ...). A tile's K and V
// rows land in the warp's shared-memory stage as 16-bit values through a tile source
// (device/decode_tiles.cuh: cp.async for 16-bit dense formats, an f16x2 decoder for TurboQuant
// k8v3, the format's reader rounded to bf16 otherwise), fetched ahead of use. Per tile:
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
#include "backends/cuda/device/decode_tiles.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::device {

constexpr int kTcDecodeWarps = 4, kTcDecodeThreads = 32 * kTcDecodeWarps;
constexpr int kTcHeads = 8;  // query heads per block (the mma's N of Oᵀ)
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

template <int kD>
struct TcPartials {
  float m[kTcDecodeWarps][kTcHeads], l[kTcDecodeWarps][kTcHeads];
  float acc[kTcDecodeWarps][kTcHeads][kD];
};

template <typename Source, int kD>
constexpr size_t tc_decode_smem_bytes() {
  const size_t tiles = sizeof(TcTile<typename Source::T, kD>) * Source::kStages * kTcDecodeWarps;
  return tiles > sizeof(TcPartials<kD>) ? tiles : sizeof(TcPartials<kD>);
}

template <typename Source, int kD>
__global__ void __launch_bounds__(kTcDecodeThreads, Source::kMinBlocks)
    decode_tc_kernel(const AttnArgs a, const Source src) {
  using T = typename Source::T;
  constexpr int kSteps = kD / 16;  // k-steps of Q·Kᵀ, m-tiles of Oᵀ
  extern __shared__ __align__(16) unsigned char smem[];
  const int G = a.q_heads / a.kv_heads, head_groups = (G + kTcHeads - 1) / kTcHeads;
  const int r = static_cast<int>(blockIdx.x) / (a.kv_heads * head_groups);
  const int kvh = static_cast<int>(blockIdx.x) / head_groups % a.kv_heads;
  const int hg = static_cast<int>(blockIdx.x) % head_groups;
  const int q0 = a.query_start[r];
  if (a.query_start[r + 1] - q0 != 1 || !query_wanted(a, a.context_len[r] - 1)) return;
  const VisibleKeys keys(a.context_len[r] - 1, a.window, a.sink_tokens);
  const int split = decode_split(keys.count, a.part_limit);
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

  const int32_t* table = a.block_table + static_cast<int64_t>(r) * a.max_blocks;
  const int tile_stride = kTcDecodeWarps * kTcKeys;
  const int warp_first = first + warp * kTcKeys;
  const int tiles = warp_first < last ? (last - warp_first + tile_stride - 1) / tile_stride : 0;
  // Key (lane mod 16) of this warp's tile t: its row, or -1 past the part's end.
  auto row_of = [&](int t) {
    const int i = warp_first + t * tile_stride + (lane & (kTcKeys - 1));
    if (i >= last) return -1;
    const int p = keys.position(i);
    const int64_t slot =
        static_cast<int64_t>(table[p / a.block_tokens]) * a.block_tokens + p % a.block_tokens;
    return static_cast<int>(slot * a.kv_heads + kvh);
  };

  const int mi = lane >> 3, mj = lane & 7;  // ldmatrix: the matrix and row this lane addresses
  // One tile of the online softmax: S = Q·Kᵀ, P, Oᵀ += Vᵀ·Pᵀ (tile t of this warp, in `tile`).
  auto consume = [&](const TcTile<T, kD>& tile, int t) {
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
  };

  TcTile<T, kD>* stages = reinterpret_cast<TcTile<T, kD>*>(smem) + warp * Source::kStages;
  if constexpr (Source::kStages == 2) {
    // cp.async sources: tile t + 1 is in flight into the other stage while tile t is consumed;
    // the block-table lookups run one tile further ahead.
    int row_next = row_of(1);
    if (tiles > 0) src.fetch(row_of(0), lane, stages[0]);
    cp_async_commit();
    for (int t = 0; t < tiles; ++t) {
      if (t + 1 < tiles) src.fetch(row_next, lane, stages[(t + 1) % 2]);
      row_next = row_of(t + 2);
      cp_async_commit();
      cp_async_wait<1>();  // tile t has landed (this lane's copies) ...
      __syncwarp();        // ... and every lane's
      consume(stages[t % 2], t);
      __syncwarp();  // every lane is done with this stage before it is refilled
    }
    cp_async_wait<0>();
  } else {
    // Register sources, one stage: tiles t + 1 and t + 2 are in flight (in registers) while
    // tile t is decoded into the stage and consumed; table lookups run a tile further ahead.
    using Raw = typename Source::Raw;
    Raw raw0{}, raw1{};
    if (tiles > 0) raw0 = src.fetch(row_of(0), lane, stages[0]);
    if (tiles > 1) raw1 = src.fetch(row_of(1), lane, stages[0]);
    int row_next = row_of(2);
    auto step = [&](Raw& raw, int t) {
      src.store(raw, stages[0], lane);
      if (t + 2 < tiles) raw = src.fetch(row_next, lane, stages[0]);
      row_next = row_of(t + 3);
      __syncwarp();
      consume(stages[0], t);
      __syncwarp();
    };
    for (int t = 0; t < tiles; t += 2) {
      step(raw0, t);
      if (t + 1 < tiles) step(raw1, t + 1);
    }
  }
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

template <typename Source, int kD>
void launch_decode_tc_with(const AttnArgs& args, const Source& source, cudaStream_t stream) {
  constexpr size_t kSmem = tc_decode_smem_bytes<Source, kD>();
  static const bool configured = [] {
    RINGLM_CUDA_CHECK(cudaFuncSetAttribute(decode_tc_kernel<Source, kD>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmem)));
    return true;
  }();
  (void)configured;
  const int group = args.q_heads / args.kv_heads;
  const int head_groups = (group + kTcHeads - 1) / kTcHeads;
  const dim3 grid(static_cast<unsigned>(args.num_rows * args.kv_heads * head_groups),
                  static_cast<unsigned>(args.max_parts));
  decode_tc_kernel<Source, kD><<<grid, kTcDecodeThreads, kSmem, stream>>>(args, source);
  check_launch("decode_tc_kernel");
}

template <typename Kv, int kD>
void launch_decode_tc_dim(const AttnArgs& args, const Kv& kv, cudaStream_t stream) {
  using Source = typename TileSourceFor<Kv, kD>::type;
  if constexpr (std::is_same_v<Source, TurboK8V3Tiles<kD>>) {
    // The f16x2 decoder reads key codes with 16-byte loads; planes at other offsets keep the
    // reader.
    if (reinterpret_cast<uintptr_t>(kv.k) % 16 != 0) {
      launch_decode_tc_with<ReaderTiles<Kv, kD>, kD>(args, ReaderTiles<Kv, kD>{kv}, stream);
      return;
    }
  }
  launch_decode_tc_with<Source, kD>(args, make_tile_source<Kv, kD>(kv), stream);
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
