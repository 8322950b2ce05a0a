// Decode attention (rows with one query) on tensor cores, split-K: one block of four warps per
// (row, kv head, group of up to 8 of its query heads, part). The query heads are the rows of the
// mma (padded to 16), so each K/V tile is read once for all of them.
//
// Each warp walks its own 16-key tiles of the part (tiles warp, warp + 4, ...). A tile's K and V
// rows land in the warp's shared-memory stage as 16-bit values through a tile source
// (device/decode_tiles.cuh: cp.async for 16-bit dense formats, the format's reader rounded to
// bf16 otherwise), fetched ahead of use; TurboQuant k8v3 skips the stage
// (device/attention_decode_turbo.cuh). Per tile:
//   S = Q·Kᵀ  (16 heads × 16 keys; Q = q·scale·log2(e) rounded to the tile dtype),
//   P = 2^(S − m) with m moved only when a score passes it by kRescaleLog2 (lazy rescaling),
//   Oᵀ += Vᵀ·Pᵀ (dims × 8 heads; V through ldmatrix.trans, P rounded to the tile dtype).
// The S accumulator's rows for heads 0..7 are exactly Pᵀ's B fragment (keys 2c, 2c + 1, 2c + 8,
// 2c + 9 of head g), so P never leaves registers. The warps merge in shared memory in warp order
// and the block writes its part's (m, l, acc) per head for decode_merge_kernel.
// Every operation depends only on the row's own keys (the split rule is per row): a row's bits are
// the same alone or batched.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/attention_decode_turbo.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/decode_tc_common.cuh"
#include "backends/cuda/device/decode_tiles.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"

namespace ringlm::cuda::device {

// Head dims this kernel serves (any GQA ratio; formats: tensor_core_reader, kv_load.cuh).
inline bool decode_tc_supported(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

template <typename Source, int kD, int kWarps>
constexpr size_t tc_decode_smem_bytes() {
  const size_t tiles = sizeof(TcTile<typename Source::T, kD>) * Source::kStages * kWarps;
  return tiles > sizeof(TcPartials<kD, kWarps>) ? tiles : sizeof(TcPartials<kD, kWarps>);
}

template <typename Source, int kD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps, tc_min_blocks<Source::kMinBlocks, kWarps>())
    decode_tc_kernel(const AttnArgs a, const Source src) {
  using T = typename Source::T;
  extern __shared__ __align__(16) unsigned char smem[];
  // The task and the block-table lookups need nothing from the kernel before us (q and this
  // step's K/V are its output): they, and the first tiles of older keys (one cp.async tile, or
  // a register source's two), go out before the wait.
  const TcDecodeTask task(a);
  if (!task.active) return;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;  // mma fragment coordinates
  // Key (lane mod 16) of this warp's tile t: its row, or -1 past the part's end.
  auto row_of = [&](int t) { return task.row(a, task.tile_start(t) + (lane & (kTcKeys - 1))); };
  const int tiles = task.tiles;
  TcTile<T, kD>* stages = reinterpret_cast<TcTile<T, kD>*>(smem) + warp * Source::kStages;
  const int row_first = row_of(0);
  using Raw = typename Source::Raw;
  Raw raw0{}, raw1{};  // register sources: tiles t and t + 1 of the loop below
  bool early;
  if constexpr (Source::kStages == 2) {
    early = a.early_fetch && tiles > 0 && task.settled(0);
    if (early) src.fetch(row_first, lane, stages[0]);
  } else {
    early = a.early_fetch && task.settled(1);
    if (early) {
      raw0 = src.fetch(row_first, lane, stages[0]);
      raw1 = src.fetch(row_of(1), lane, stages[0]);
    }
  }
  wait_prior_grid();
  launch_dependents();

  // k-step s of Q·Kᵀ: dims 16s + 2c (+1) and 16s + 8 + 2c (+1), as ldmatrix delivers K.
  uint32_t qf[kD / 16][2];
  load_q_fragments<T, kD>(
      a, task, g, [c](int s, int h) { return 16 * s + 8 * h + 2 * c; }, qf);
  TcOnlineSoftmax<T, kD> soft;

  const int mi = lane >> 3, mj = lane & 7;  // ldmatrix: the matrix and row this lane addresses
  // One tile of the online softmax: S = Q·Kᵀ, P, Oᵀ += Vᵀ·Pᵀ (tile t of this warp, in `tile`).
  auto consume = [&](const TcTile<T, kD>& tile, int t) {
    // S = Q·Kᵀ, two n-tiles of 8 keys: s[n][0], s[n][1] = head g, keys 8n + 2c, 8n + 2c + 1.
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int s2 = 0; s2 < kD / 32; ++s2) {
        uint32_t b[4];
        ldmatrix_x4(b, &tile.k[8 * n + mj][32 * s2 + 8 * mi]);
        tc_scores<T, kD>(qf, 2 * s2, b[0], b[1], s[n]);
        tc_scores<T, kD>(qf, 2 * s2 + 1, b[2], b[3], s[n]);
      }
    }
    uint32_t p[2];
    soft.probabilities(a, s, task.tile_start(t), task.last, c, p);
#pragma unroll
    for (int i = 0; i < kD / 16; ++i) {
      uint32_t av[4];  // Vᵀ rows 16i .. 16i + 15 (dims) × the 16 keys
      ldmatrix_x4_trans(av, &tile.v[8 * (mi >> 1) + mj][16 * i + 8 * (mi & 1)]);
      mma16816<T>(soft.o[i], av, p[0], p[1]);
    }
  };

  if constexpr (Source::kStages == 2) {
    // cp.async sources: tile t + 1 is in flight into the other stage while tile t is consumed;
    // the block-table lookups run one tile further ahead.
    int row_next = row_of(1);
    if (tiles > 0 && !early) src.fetch(row_first, lane, stages[0]);
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
    // Fetches are unconditional (a tile past the end reads row 0 as zeros and is never
    // consumed): a conditional load merges two values into `raw`, and the register copy that
    // takes makes the warp wait for the load right there.
    if (!early) {
      raw0 = src.fetch(row_first, lane, stages[0]);
      raw1 = src.fetch(row_of(1), lane, stages[0]);
    }
    int row_next = row_of(2);
    auto step = [&](Raw& raw, int t) {
      src.store(raw, stages[0], lane);
      raw = src.fetch(row_next, lane, stages[0]);
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
  // Oᵀ m-tile i: rows g and g + 8 are dims 16i + g and 16i + 8 + g (ldmatrix.trans of V).
  // The direct write (AttnArgs::direct_out) only in the 16-bit kernels (cp.async sources).
  soft.template write_partials<kWarps, Source::kStages == 2>(
      a, task, smem, [g](int i, int h) { return 16 * i + 8 * h + g; });
}

template <typename Source, int kD, int kWarps>
void launch_decode_tc_warps(const AttnArgs& args, const Source& source, cudaStream_t stream) {
  launch_tc_decode<decode_tc_kernel<Source, kD, kWarps>, kWarps,
                   tc_decode_smem_bytes<Source, kD, kWarps>()>(args, source, stream,
                                                               "decode_tc_kernel");
}

// Eight-warp blocks only for the cp.async (16-bit) sources whose stages fit the 227 KB of shared
// memory a block may have (head dims <= 128): the register sources keep four (their
// instantiations are many, and none was measured with eight).
template <typename Source, int kD>
void launch_decode_tc_with(const AttnArgs& args, const Source& source, cudaStream_t stream) {
  if constexpr (Source::kStages == 2 && tc_decode_smem_bytes<Source, kD, 8>() <= 227 * 1024) {
    if (args.decode_warps == 8) return launch_decode_tc_warps<Source, kD, 8>(args, source, stream);
  }
  launch_decode_tc_warps<Source, kD, kTcDecodeWarps>(args, source, stream);
}

template <typename Kv, int kD>
void launch_decode_tc_dim(const AttnArgs& args, const Kv& kv, cudaStream_t stream) {
  // TurboQuant k8v3: codes decoded straight into the mma fragments (planes at other offsets
  // keep the reader).
  if constexpr (std::is_same_v<Kv, TurboKvReader<8, 3>>) {
    if (launch_decode_turbo_k8v3<kD>(args, kv, stream)) return;
  }
  if constexpr (is_affine_reader<Kv>() && kD <= 128) {
    using Prefetching = AffineTiles<Kv::kCodeBits, Kv::kGroupSize, kD>;
    // Registers bounded to 3 blocks per SM (168, a few hundred bytes of spills at head dim 128):
    // +2-19 % at 32k over 2 blocks (255 registers; H200, docs/benchmarks.md), the same bits.
    // RINGLM_CUDA_AFFINE_MIN_BLOCKS=2 keeps 2 (same-binary A/B).
    static const bool three_blocks = [] {
      const char* v = std::getenv("RINGLM_CUDA_AFFINE_MIN_BLOCKS");
      return v == nullptr || v[0] != '2';
    }();
    if (args.affine_prefetch && three_blocks && Prefetching::aligned(kv)) {
      AffineTiles<Kv::kCodeBits, Kv::kGroupSize, kD, 3> source{};
      source.kv = kv;
      launch_decode_tc_with<decltype(source), kD>(args, source, stream);
      return;
    }
    if (args.affine_prefetch && Prefetching::aligned(kv)) {
      Prefetching source{};
      source.kv = kv;
      launch_decode_tc_with<Prefetching, kD>(args, source, stream);
      return;
    }
  }
  using Source = typename TileSourceFor<Kv, kD>::type;
  launch_decode_tc_with<Source, kD>(args, make_tile_source<Kv, kD>(kv), stream);
}

// The decode rows of a step (decode_tc_supported(head_dim) and tensor_core_reader<Kv>() must hold;
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
