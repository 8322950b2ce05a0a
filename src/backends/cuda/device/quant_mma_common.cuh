// What the two tensor-core decode GEMMs for MLX-quantized weights share (quant_mma.cu: codes
// dequantized per element; quant_mma_grouped.cu: 4-bit codes summed per group, scaled after):
// the block shape, the launch's targets, the x pages in shared memory and the end of a tile —
// its store, or with splits of K its partial sums and the last block's ordered reduction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/mma.cuh"

namespace ringlm::cuda::qmma {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileCols = 16 * kWarps;  // w rows (y columns) per block: one mma m-tile per warp
constexpr int kPageK = 256;             // k per x page
constexpr int kPageUnits = kPageK / 4;  // 16-byte f32 units per x row of a page
constexpr int kXStages = 3;             // x pages in flight (shared memory)
constexpr int kDepth = 4;               // chunks of codes in flight per thread
// x pages in shared memory: a row is kRowUnits 16-byte f32 units (4 of padding), the row stride 4
// mod 8 units, so the 8 lanes of a quarter-warp reading unit i·4 + c of rows g hit 8 distinct
// 16-byte bank groups.
constexpr int kRowUnits = kPageUnits + 4;

// One weight of a launch (q, k and v, or gate and up, share one launch and x).
struct MmaTarget {
  const uint32_t* codes;   // U32[N, row_words]
  const uint16_t* scales;  // BF16[N, groups] (as bits)
  const uint16_t* biases;  // BF16[N, groups]
  device::AnyFloat bias;   // [N] or null
  float* y;                // F32[M, ldy]
  float* partials;         // F32[splits, M, N] (splits > 1)
  int64_t ldy;
  int N, tiles, splits, pages_per_split;
  int block_begin;   // its first block in the grid (INT_MAX for an unused slot)
  int ticket_begin;  // its first column tile's ticket
};

constexpr int kMaxTargets = 3;
struct MmaArgs {
  MmaTarget t0, t1, t2;  // in grid order; named, not an array: selects, no local copies
  const float* x;        // F32[M, ldx]
  unsigned* tickets;     // [column tiles of all targets], zero between launches
  int64_t ldx, row_words;
  int groups, group_shift;  // group = k >> group_shift
  int M, K;
};

// The target that owns grid block `block`.
__device__ __forceinline__ MmaTarget target_of(const MmaArgs& a, int block) {
  MmaTarget t = a.t0;
  if (block >= a.t1.block_begin) t = a.t1;
  if (block >= a.t2.block_begin) t = a.t2;
  return t;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}
__device__ __forceinline__ uint32_t bf16_pair(uint32_t bits) {  // (v, v)
  return __byte_perm(bits, 0, 0x1010);
}
__device__ __forceinline__ __nv_bfloat162 as_bf162(uint32_t v) {
  return *reinterpret_cast<const __nv_bfloat162*>(&v);
}
__device__ __forceinline__ uint32_t as_u32(__nv_bfloat162 v) {
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ float bf16_bits_to_f32(uint32_t bits) {
  return __uint_as_float(bits << 16);
}

// x rows past M read as zeros in every stage (copy_x_page writes real rows only). xs: the
// stages, `units` 16-byte units of kRows rows each.
template <int kRows>
__device__ __forceinline__ void zero_padding_rows(const MmaArgs& a, float4* xs, int units) {
  for (int v = static_cast<int>(threadIdx.x); v < units; v += kThreads) {
    if ((v / kRowUnits) % kRows >= a.M) xs[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The page of x's real rows at k0 into `stage` by cp.async (the caller commits): unit u of a row
// (k0 + 4u .. + 3) at stored(u) of its row.
template <typename StoredUnit>
__device__ __forceinline__ void copy_x_page(const MmaArgs& a, float4* stage, int64_t k0,
                                            StoredUnit stored) {
  for (int v = static_cast<int>(threadIdx.x); v < a.M * kPageUnits; v += kThreads) {
    const int r = v / kPageUnits, u = v % kPageUnits;
    device::cp_async16(stage + r * kRowUnits + stored(u), a.x + r * a.ldx + k0 + 4 * u, true);
  }
}

// The end of a block's tile: acc[t][e] is w row row0 + g (+ 8 for e >= 2) against x row
// 8t + 2c (+ 1 for odd e). One split: stored (+ the bias). Several: the block writes its partial
// sums; the last block of the tile to finish (a ticket per tile) adds the splits in split order,
// stores, and resets the ticket for the next launch. `last_block`: a __shared__ flag.
template <int MT>
__device__ __forceinline__ void finish_tile(const MmaArgs& a, const MmaTarget& T, int tile,
                                            int split, int row0, float (&acc)[MT][4],
                                            bool& last_block) {
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, c = lane & 3;
  const auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int t = 0; t < MT; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = row0 + g + 8 * (e >> 1), m = 8 * t + 2 * c + (e & 1);
        if (n < T.N && m < a.M) f(acc[t][e], int64_t{m}, int64_t{n});
      }
    }
  };
  const auto store = [&](float v, int64_t m, int64_t n) {
    T.y[m * T.ldy + n] = T.bias.p != nullptr ? v + T.bias[n] : v;
  };
  if (T.splits == 1) {
    for_each_output(store);
    return;
  }
  const int64_t plane = int64_t{a.M} * T.N;  // one split's partial sums
  float* mine = T.partials + split * plane;
  for_each_output([&](float v, int64_t m, int64_t n) { mine[m * T.N + n] = v; });
  __threadfence();  // the partials are visible before the ticket says so
  __syncthreads();
  unsigned* ticket = a.tickets + T.ticket_begin + tile;
  if (threadIdx.x == 0) last_block = atomicAdd(ticket, 1u) == static_cast<unsigned>(T.splits - 1);
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  // The splits' sums added in split order; the loads of kGroup splits go out before their adds.
  constexpr int kGroup = 8 / MT;
#pragma unroll
  for (int t = 0; t < MT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  for (int s0 = 0; s0 < T.splits; s0 += kGroup) {
    float part[kGroup][MT][4];
#pragma unroll
    for (int q = 0; q < kGroup; ++q) {
      const float* plane_q = T.partials + min(s0 + q, T.splits - 1) * plane;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = row0 + g + 8 * (e >> 1), m = 8 * t + 2 * c + (e & 1);
          part[q][t][e] = n < T.N && m < a.M ? __ldcg(plane_q + int64_t{m} * T.N + n) : 0.0f;
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kGroup; ++q) {
      if (s0 + q >= T.splits) break;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[t][e] += part[q][t][e];
      }
    }
  }
  for_each_output(store);
  if (threadIdx.x == 0) *ticket = 0;  // ready for the next launch
}

// The 4-bit grouped kernel (quant_mma_grouped.cu) for MLX group sizes 32, 64 and 128 (rows 1-8:
// mt 1, 9-16: mt 2), launched with PDL like the per-element kernel.
void launch_quant_mma_grouped(const MmaArgs& args, int blocks, int mt, int group_size,
                              cudaStream_t stream);

}  // namespace ringlm::cuda::qmma
