// The tensor-core decode GEMM for 4-bit MLX weights with the scales and biases applied per group
// (quant_mma.h; group sizes 32, 64 and 128): y = Σ_groups s·Σ q·x + b·Σ x, instead of
// dequantizing every code to bf16(s·q + b) before the mma as quant_mma.cu does.
//
// Why: at 1-16 rows the per-element kernel is bound by its instructions — 261 per KB of codes,
// four per pair of codes (shift, mask-and-or into bf16 128 + q, subtract 128, s·q + b) — not by
// its bytes (Nsight, docs/benchmarks.md). Here a pair costs its shift and mask-and-or: the mma
// sums (128 + q)·x over the group in f32, a second mma with an all-ones A operand sums x over the
// same k (the group's Σ x, from the same bf16 x), and per group and output
//   y += s·Σ(128 + q)·x + (b − 128·s)·Σ x,
// two f32 FMAs per accumulator — s·q·x + b·x with every product exact.
//
// Layout: the block, the x pages, the split of K and the end of a tile are quant_mma.cu's
// (device/quant_mma_common.cuh). A chunk is 128 k (64 bytes of codes per row); a k-step of the
// mma takes 4 codes from each of the 4 lanes of a row, so each k-step must lie in one group: lane
// c holds G/4 codes of every group of the chunk (G/8 bytes at group h's byte h·G/2 + c·G/8) and
// x's units are stored in that order (stored_unit). Word j of a lane's codes holds codes k0 ..
// k0 + 7; the pairs (p, p + 4) are one mask-and-or each, and x's B fragments pair the same k.
//
// Precision (quant_mma.h): x rounded to bf16; (128 + q)·x exact; f32 sums — the group's sum
// carries the 128·Σ x it later cancels, so its rounding is relative to Σ(128 + q)·|x|·|s|.
#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/quant_mma_common.cuh"
#include "backends/cuda/runtime.h"

namespace ringlm::cuda::qmma {

namespace {

constexpr int kChunkK = 128;                      // 16 bytes of 4-bit codes per lane and row
constexpr int kChunkUnits = kChunkK / 4;          // 16-byte f32 units of x per chunk and row
constexpr int kChunksPerPage = kPageK / kChunkK;  // 2
constexpr int kChunkWords = kChunkK / 8;          // u32 words of codes per chunk and row
static_assert(kDepth % kChunksPerPage == 0, "a page starts at a fixed slot of the code ring");

template <int G>
struct GroupLayout {
  static_assert(G == 32 || G == 64 || G == 128, "MLX group sizes");
  static constexpr int kGroups = kChunkK / G;               // groups per chunk: 4, 2, 1
  static constexpr int kWords = G / 32;                     // a lane's words per group and row
  static constexpr int kLaneUnits = G / 16;                 // a lane's x units per group
  static constexpr int kScaleWords = kGroups == 4 ? 2 : 1;  // a chunk's bf16 scales of a row
};

// One chunk of a lane's codes (rows g and g + 8: group h's words at h·kWords) and the two rows'
// scales and biases of the chunk's groups (bf16 bits, group h at half h of the words).
template <int G>
struct Chunk {
  uint32_t a[4], b[4];
  uint32_t scale_a[GroupLayout<G>::kScaleWords], bias_a[GroupLayout<G>::kScaleWords];
  uint32_t scale_b[GroupLayout<G>::kScaleWords], bias_b[GroupLayout<G>::kScaleWords];
};

// Streamed (evict-first) loads of N consecutive words: codes are read once per call.
template <int N>
__device__ __forceinline__ void load_code_words(const uint32_t* p, uint32_t* w) {
  if constexpr (N == 4) {
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (N == 2) {
    const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p));
    w[0] = v.x, w[1] = v.y;
  } else {
    w[0] = __ldcs(p);
  }
}

// A chunk's kGroups bf16 values of a row (scales or biases) from p (the chunk's first group).
template <int G>
__device__ __forceinline__ void load_group_values(const uint16_t* p, uint32_t* w) {
  if constexpr (GroupLayout<G>::kGroups == 4) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x, w[1] = v.y;
  } else if constexpr (GroupLayout<G>::kGroups == 2) {
    w[0] = __ldg(reinterpret_cast<const uint32_t*>(p));
  } else {
    w[0] = __ldg(p);
  }
}

// Group h's value among a chunk's (load_group_values) as f32.
__device__ __forceinline__ float group_value(const uint32_t* w, int h) {
  const uint32_t word = w[h >> 1];
  return __uint_as_float((h & 1) ? (word & 0xFFFF0000u) : (word << 16));
}

// Where unit u (k = 4u .. 4u + 3) of an x page row is stored: within each chunk, unit i of lane
// c's k list (group after group, G/16 units each) at i·4 + c.
template <int G>
__device__ __forceinline__ int stored_unit(int u) {
  using L = GroupLayout<G>;
  const int chunk = u / kChunkUnits, w = u % kChunkUnits;
  const int h = w / (G / 4), o = w % (G / 4);
  const int lane = o / L::kLaneUnits, i = h * L::kLaneUnits + o % L::kLaneUnits;
  return chunk * kChunkUnits + i * 4 + lane;
}

// Nibbles p and p + 4 of a 4-bit word as the bf16 pair (128 + q_p, 128 + q_(p+4)): exact.
template <int P>
__device__ __forceinline__ uint32_t offset_nibbles(uint32_t w) {
  uint32_t pair;  // (w >> 4P) & 0x000F000F | 0x43004300
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;"
      : "=r"(pair)
      : "r"(w >> (4 * P)), "r"(0x000F000Fu), "r"(0x43004300u));
  return pair;
}

constexpr uint32_t kBf16OnePair = 0x3F803F80u;

template <int G, int MT>
__global__ void __launch_bounds__(kThreads, 4) quant_mma_grouped_kernel(const MmaArgs a) {
  using L = GroupLayout<G>;
  constexpr int kRows = 8 * MT;  // x rows a stage holds (M rounded up to the mma's 8)
  constexpr int kStageUnits = kRows * kRowUnits;
  extern __shared__ __align__(16) float4 xs[];  // [kXStages][kRows][kRowUnits]
  __shared__ bool last_block;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int block = static_cast<int>(blockIdx.x);
  const MmaTarget T = target_of(a, block);
  const int tile = (block - T.block_begin) % T.tiles, split = (block - T.block_begin) / T.tiles;
  const int first_page = split * T.pages_per_split;
  const int pages = min(T.pages_per_split, a.K / kPageK - first_page);  // >= 1 by the plan
  const int count = pages * kChunksPerPage;
  const int first = first_page * kChunksPerPage;
  const int row0 = tile * kTileCols + 16 * warp;
  // Rows past N (the last tile only) re-read row N - 1 and are never stored.
  const int64_t ra = min(row0 + g, T.N - 1), rb = min(row0 + g + 8, T.N - 1);
  const uint32_t* wa = T.codes + ra * a.row_words + first * kChunkWords + c * L::kWords;
  const uint32_t* wb = T.codes + rb * a.row_words + first * kChunkWords + c * L::kWords;
  const int64_t group0 = int64_t{first} * L::kGroups;
  const uint16_t* sa = T.scales + ra * a.groups + group0;
  const uint16_t* sb = T.scales + rb * a.groups + group0;
  const uint16_t* ba = T.biases + ra * a.groups + group0;
  const uint16_t* bb = T.biases + rb * a.groups + group0;
  const auto load_w = [&](int i, Chunk<G>& d) {
    if (i >= count) return;
#pragma unroll
    for (int h = 0; h < L::kGroups; ++h) {
      load_code_words<L::kWords>(wa + i * kChunkWords + h * (G / 8), d.a + h * L::kWords);
      load_code_words<L::kWords>(wb + i * kChunkWords + h * (G / 8), d.b + h * L::kWords);
    }
    load_group_values<G>(sa + i * L::kGroups, d.scale_a);
    load_group_values<G>(ba + i * L::kGroups, d.bias_a);
    load_group_values<G>(sb + i * L::kGroups, d.scale_b);
    load_group_values<G>(bb + i * L::kGroups, d.bias_b);
  };
  // Codes are no earlier kernel's output: their first loads go out before the wait.
  Chunk<G> wv[kDepth];
#pragma unroll
  for (int p = 0; p < kDepth; ++p) load_w(p, wv[p]);
  zero_padding_rows<kRows>(a, xs, kXStages * kStageUnits);
  device::wait_prior_grid();
  device::launch_dependents();

  const auto load_x = [&](int page) {  // page into stage page % kXStages; real rows only
    if (page < pages) {
      copy_x_page(a, xs + (page % kXStages) * kStageUnits, int64_t{first_page + page} * kPageK,
                  [](int u) { return stored_unit<G>(u); });
    }
    device::cp_async_commit();  // empty groups keep the wait counts uniform
  };
#pragma unroll
  for (int p = 0; p < kXStages - 1; ++p) load_x(p);

  float acc[MT][4];
#pragma unroll
  for (int t = 0; t < MT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  const uint32_t ones[4] = {kBf16OnePair, kBf16OnePair, kBf16OnePair, kBf16OnePair};
  // acc[t] += the warp's 16 rows of w · (x rows 8t .. 8t + 7)ᵀ over chunk ci of a page.
  const auto consume = [&](const float4* stage, int ci, const Chunk<G>& w) {
    // xr[t][4i]: unit i of lane c's k list in the chunk, x row 8t + g.
    const float4* xr[MT];
#pragma unroll
    for (int t = 0; t < MT; ++t) xr[t] = stage + (8 * t + g) * kRowUnits + ci * kChunkUnits + c;
#pragma unroll
    for (int h = 0; h < L::kGroups; ++h) {
      float sums[MT][4], x_sums[MT][4];  // Σ(128 + q)·x and Σ x over the group
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) sums[t][e] = x_sums[t][e] = 0.0f;
      }
#pragma unroll
      for (int jj = 0; jj < L::kWords; ++jj) {
        const int j = h * L::kWords + jj;
        const uint32_t pa[4] = {offset_nibbles<0>(w.a[j]), offset_nibbles<1>(w.a[j]),
                                offset_nibbles<2>(w.a[j]), offset_nibbles<3>(w.a[j])};
        const uint32_t pb[4] = {offset_nibbles<0>(w.b[j]), offset_nibbles<1>(w.b[j]),
                                offset_nibbles<2>(w.b[j]), offset_nibbles<3>(w.b[j])};
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const float4 lo = xr[t][8 * j], hi = xr[t][8 * j + 4];  // k0 .. k0 + 3, k0 + 4 .. + 7
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const uint32_t frag[4] = {pa[2 * s], pb[2 * s], pa[2 * s + 1], pb[2 * s + 1]};
            const uint32_t b0 = s == 0 ? device::pack2<__nv_bfloat16>(lo.x, hi.x)
                                       : device::pack2<__nv_bfloat16>(lo.z, hi.z);
            const uint32_t b1 = s == 0 ? device::pack2<__nv_bfloat16>(lo.y, hi.y)
                                       : device::pack2<__nv_bfloat16>(lo.w, hi.w);
            device::mma16816<__nv_bfloat16>(sums[t], frag, b0, b1);
            device::mma16816<__nv_bfloat16>(x_sums[t], ones, b0, b1);
          }
        }
      }
      // Rows g (e < 2) and g + 8: s·Σ(128 + q)·x + (b − 128·s)·Σ x.
      const float s_a = group_value(w.scale_a, h), s_b = group_value(w.scale_b, h);
      const float b_a = fmaf(-128.0f, s_a, group_value(w.bias_a, h));
      const float b_b = fmaf(-128.0f, s_b, group_value(w.bias_b, h));
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s = e < 2 ? s_a : s_b, b = e < 2 ? b_a : b_b;
          acc[t][e] = fmaf(s, sums[t][e], fmaf(b, x_sums[t][e], acc[t][e]));
        }
      }
    }
  };
  for (int i0 = 0; i0 < count; i0 += kDepth) {
#pragma unroll
    for (int p = 0; p < kDepth; ++p) {
      const int i = i0 + p;
      if (i >= count) break;
      const int page = i / kChunksPerPage;
      if (p % kChunksPerPage == 0) {  // i0 is a multiple of kDepth: i starts a page exactly here
        device::cp_async_wait<kXStages - 2>();  // this page's x has landed (this thread's copies)
        __syncthreads();  // ... every thread's, and every warp is done with the page before
        load_x(page + kXStages - 1);
      }
      consume(xs + (page % kXStages) * kStageUnits, p % kChunksPerPage, wv[p]);
      load_w(i + kDepth, wv[p]);
    }
  }
  device::cp_async_wait<0>();
  finish_tile<MT>(a, T, tile, split, row0, acc, last_block);
}

template <int G, int MT>
void launch_grouped(const MmaArgs& args, int blocks, cudaStream_t stream) {
  constexpr size_t kSmem = sizeof(float4) * kXStages * 8 * MT * kRowUnits;
  static const bool sized = [] {
    RINGLM_CUDA_CHECK(cudaFuncSetAttribute(quant_mma_grouped_kernel<G, MT>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmem)));
    return true;
  }();
  (void)sized;
  launch_pdl(quant_mma_grouped_kernel<G, MT>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
             kSmem, stream, args);
}

template <int G>
void launch_group_size(const MmaArgs& args, int blocks, int mt, cudaStream_t stream) {
  mt == 2 ? launch_grouped<G, 2>(args, blocks, stream) : launch_grouped<G, 1>(args, blocks, stream);
}

}  // namespace

void launch_quant_mma_grouped(const MmaArgs& args, int blocks, int mt, int group_size,
                              cudaStream_t stream) {
  switch (group_size) {
    case 32:
      return launch_group_size<32>(args, blocks, mt, stream);
    case 64:
      return launch_group_size<64>(args, blocks, mt, stream);
    default:
      return launch_group_size<128>(args, blocks, mt, stream);
  }
}

}  // namespace ringlm::cuda::qmma
