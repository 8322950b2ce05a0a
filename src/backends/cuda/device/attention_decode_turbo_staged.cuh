// Decode attention over TurboQuant k8v3 K/V at head_dim 128 with each warp's tiles brought into
// shared memory by cp.async, kStages − 1 tiles in flight while one is consumed — the register
// kernel's arithmetic (device/attention_decode_turbo.cuh: scores, accumulate, the online softmax
// and the partials are TurboK8V3Fragments' own) on the same values, so the same bits.
//
// Why: the register kernel holds one tile in flight per warp (a second in registers spilled or
// cost blocks per SM), so at one row — 264 blocks, two per SM — each warp waits out a DRAM round
// trip per tile: Nsight (H100, 32k × 1) put 18 % of its stall samples on the loop top waiting for
// the tile's loads and 8 % on the block-table arithmetic, with the SMs' issue ~40 % busy.
// cp.async copies are tracked by commit groups, not by the register scoreboard, so tiles t + 1 ..
// t + kStages − 1 stay in flight while tile t is decoded from shared memory.
//
// A stage is 16 keys' rows as stored (TurboK8V3StageLayout). The copies: lane j and lane j + 16
// both hold key j's row (TcDecodeTask::row), so each copies a share of that row — 16-byte units of
// the key codes (8) and value codes (3), 8-byte copies of its key scales, key zeros and value
// scales — with no shuffles. Reads: each lane builds TurboK8V3Fragments::Raw (what the register
// kernel's fetch loads from global memory) from the stage; the key rows' 64-byte halves are
// swapped on odd keys, so the 16-byte reads of rows g and g + 8 of a quarter-warp (g = 2q, 2q + 1)
// hit distinct banks.
#pragma once

#include <cstdint>

#include "backends/cuda/device/attention_decode_turbo.cuh"
#include "backends/cuda/device/decode_tc_common.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"

namespace ringlm::cuda::device {

// One tile's stored rows in a warp's stage (head_dim 128), byte offsets.
struct TurboK8V3StageLayout {
  static constexpr int kKeys = 0;                         // [16][128] int8 codes (halves swapped)
  static constexpr int kKeyScales = kKeys + 16 * 128;     // [16][4] f16
  static constexpr int kKeyZeros = kKeyScales + 16 * 8;   // [16][4] f16
  static constexpr int kValues = kKeyZeros + 16 * 8;      // [16][48] 3-bit codes
  static constexpr int kValueScales = kValues + 16 * 48;  // [16][4] f16
  static constexpr int kBytes = kValueScales + 16 * 8;    // 3200
};

// 8 bytes global -> shared (cp.async.ca: copies below 16 bytes take the L1 path).
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(gmem) : "memory");
}

template <int kStages>
struct TurboK8V3Staged {
  static_assert(kStages >= 2, "TurboK8V3Staged: at least one tile in flight");
  using Fragments = TurboK8V3Fragments<128>;
  using Raw = Fragments::Raw;
  using Layout = TurboK8V3StageLayout;
  static constexpr int kStageBytes = Layout::kBytes;
  Fragments fragments;

  template <int kWarps>
  static constexpr size_t smem_bytes() {
    const size_t stages = size_t{kStageBytes} * kStages * kWarps;
    return stages > sizeof(TcPartials<128, kWarps>) ? stages : sizeof(TcPartials<128, kWarps>);
  }

  // The planes' alignment the copies need (16-byte code units, 8-byte scale rows).
  __host__ static bool aligned(const TurboKvReader<8, 3>& kv) {
    const auto at = [](const void* p, uintptr_t n) {
      return reinterpret_cast<uintptr_t>(p) % n == 0;
    };
    return at(kv.k, 16) && at(kv.v, 16) && at(kv.k_scales, 8) && at(kv.k_zeros, 8) &&
           at(kv.v_scales, 8);
  }

  // Starts copying the tile whose key (lane mod 16) is stored in row my_row (-1 past the part's
  // end: row 0 is copied and never used) into `stage`. Lanes j and j + 16 split the row: key
  // units 2i + half (i = 0..3), value unit half and (half 0) value unit 2; half 0 also the key
  // scales and value scales, half 1 the key zeros.
  __device__ __forceinline__ void copy(int my_row, int lane, unsigned char* stage) const {
    const TurboKvReader<8, 3>& kv = fragments.kv;
    const int key = lane & 15, half = lane >> 4;
    const uint64_t r = static_cast<uint32_t>(my_row >= 0 ? my_row : 0);
    const uint8_t* k = kv.k + r * 128;
    const uint8_t* v = kv.v + r * 48;
    const int swap = (key & 1) << 6;
    unsigned char* const keys = stage + Layout::kKeys + key * 128;
    unsigned char* const values = stage + Layout::kValues + key * 48;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int unit = 2 * i + half;
      cp_async16(keys + ((16 * unit) ^ swap), k + 16 * unit, true);
    }
    cp_async16(values + 16 * half, v + 16 * half, true);
    if (half == 0) {
      cp_async16(values + 32, v + 32, true);
      cp_async8(stage + Layout::kKeyScales + key * 8, kv.k_scales + r * 4);
      cp_async8(stage + Layout::kValueScales + key * 8, kv.v_scales + r * 4);
    } else {
      cp_async8(stage + Layout::kKeyZeros + key * 8, kv.k_zeros + r * 4);
    }
  }

  // This lane's Raw of the tile in `stage` (the register kernel's fetch, from shared memory);
  // valid: Raw::valid.
  __device__ __forceinline__ Raw read(const unsigned char* stage, int g, int c,
                                      uint32_t valid) const {
    Raw raw;
    raw.valid = valid;
    const int swap = (g & 1) << 6;  // keys g and g + 8 have g's parity
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int key = g + 8 * n;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        raw.k[n][j] = *reinterpret_cast<const uint4*>(stage + Layout::kKeys + key * 128 +
                                                      ((64 * j + 16 * c) ^ swap));
      }
      const uint2 s = *reinterpret_cast<const uint2*>(stage + Layout::kKeyScales + key * 8);
      const uint2 z = *reinterpret_cast<const uint2*>(stage + Layout::kKeyZeros + key * 8);
      raw.ks[n][0] = s.x;
      raw.ks[n][1] = s.y;
      raw.kz[n][0] = z.x;
      raw.kz[n][1] = z.y;
    }
    const int offset = Fragments::kValueBytes * g;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int key = 2 * c + (kk & 1) + 8 * (kk >> 1);
      const auto* words =
          reinterpret_cast<const uint32_t*>(stage + Layout::kValues + key * 48 + (offset & ~3));
      raw.v[kk][0] = words[0];
      raw.v[kk][1] = words[1];
      raw.vs[kk] = reinterpret_cast<const uint16_t*>(
          stage + Layout::kValueScales)[key * 4 + Fragments::kValueDims * g / 32];
    }
    return raw;
  }

  // Raw::valid of the tile starting at visible key i0 (keys at or past `last` decode as zeros):
  // bit n for key 8n + g, bit 2 + kk for value key kk (2c, 2c + 1, 2c + 8, 2c + 9).
  __device__ __forceinline__ static uint32_t valid_bits(int i0, int last, int g, int c) {
    uint32_t valid = 0;
#pragma unroll
    for (int n = 0; n < 2; ++n) valid |= i0 + 8 * n + g < last ? 1u << n : 0u;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int key = 2 * c + (kk & 1) + 8 * (kk >> 1);
      valid |= i0 + key < last ? 4u << kk : 0u;
    }
    return valid;
  }
};

template <int kStages, int kWarps>
__global__ void __launch_bounds__(32 * kWarps,
                                  tc_min_blocks<TurboK8V3Fragments<128>::kMinBlocks, kWarps>())
    decode_turbo_k8v3_staged_kernel(const AttnArgs a, const TurboK8V3Staged<kStages> src) {
  using Source = TurboK8V3Staged<kStages>;
  using T = typename Source::Fragments::T;
  constexpr int kD = 128;
  extern __shared__ __align__(16) unsigned char smem[];
  const TcDecodeTask task(a);
  if (!task.active) return;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  unsigned char* const stages = smem + warp * kStages * Source::kStageBytes;
  const auto stage = [&](int t) { return stages + (t % kStages) * Source::kStageBytes; };
  const auto row_of = [&](int t) {
    return task.row(a, task.tile_start(t) + (lane & (kTcKeys - 1)));
  };
  const int tiles = task.tiles;
  // Tile t's copies as one commit group (an empty one past the last tile: the wait counts stay
  // uniform).
  const auto issue = [&](int t, int row) {
    if (t < tiles) src.copy(row, lane, stage(t));
    cp_async_commit();
  };
  // The first kStages − 1 tiles go out before the wait when they hold only keys older than the
  // query's own (no kernel of the step writes those; device/attention_decode_tc.cuh).
  const bool early = a.early_fetch && task.settled(kStages - 2);
  if (early) {
#pragma unroll
    for (int k = 0; k + 1 < kStages; ++k) issue(k, row_of(k));
  }
  wait_prior_grid();
  launch_dependents();

  uint32_t qf[kD / 16][2];
  load_q_fragments<T, kD>(
      a, task, g, [c](int s, int h) { return 64 * (s / 4) + 16 * c + 4 * (s % 4) + 2 * h; }, qf);
  TcHeadColumnsSoftmax<T, kD> soft;
  if (!early) {
#pragma unroll
    for (int k = 0; k + 1 < kStages; ++k) issue(k, row_of(k));
  }
  // The block-table lookups run a tile ahead of the copies.
  int row_next = row_of(kStages - 1);
  for (int t = 0; t < tiles; ++t) {
    issue(t + kStages - 1, row_next);  // into the stage tile t − 1 left (the __syncwarp below)
    row_next = row_of(t + kStages);
    cp_async_wait<kStages - 1>();  // tile t has landed (this lane's copies) ...
    __syncwarp();                  // ... and every lane's
    const int i0 = task.tile_start(t);
    const typename Source::Raw raw =
        src.read(stage(t), g, c, Source::valid_bits(i0, task.last, g, c));
    float st[4];
    src.fragments.scores(raw, qf, c, st);
    uint32_t p[2];
    soft.probabilities(a, st, i0, task.last, g, p);
    src.fragments.accumulate(raw, g, p, soft.o);
    __syncwarp();  // every lane is done with the stage before it is refilled
  }
  cp_async_wait<0>();
  constexpr int kValueDims = Source::Fragments::kValueDims;
  soft.template write_partials<kWarps>(a, task, smem,
                                       [g](int i, int h) { return kValueDims * g + 2 * i + h; });
}

template <int kStages>
void launch_decode_turbo_k8v3_staged(const AttnArgs& args, const TurboKvReader<8, 3>& kv,
                                     cudaStream_t stream) {
  using Source = TurboK8V3Staged<kStages>;
  const Source source{TurboK8V3Fragments<128>::make(kv)};
  launch_tc_decode<decode_turbo_k8v3_staged_kernel<kStages, kTcDecodeWarps>, kTcDecodeWarps,
                   Source::template smem_bytes<kTcDecodeWarps>()>(
      args, source, stream, "decode_turbo_k8v3_staged_kernel");
}

// The staged kernel when args.turbo_stages asks for it (3 or 4), the head_dim is 128, the block
// has four warps and the planes are aligned for the copies; false otherwise.
template <int kD>
bool launch_decode_turbo_k8v3_staged_if(const AttnArgs& args, const TurboKvReader<8, 3>& kv,
                                        cudaStream_t stream) {
  if constexpr (kD != 128) {
    return false;
  } else {
    if (args.decode_warps != kTcDecodeWarps || !TurboK8V3Staged<3>::aligned(kv)) return false;
    if (args.turbo_stages == 3) return launch_decode_turbo_k8v3_staged<3>(args, kv, stream), true;
    if (args.turbo_stages == 4) return launch_decode_turbo_k8v3_staged<4>(args, kv, stream), true;
    return false;
  }
}

}  // namespace ringlm::cuda::device
