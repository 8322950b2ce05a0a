// The tensor-core decode GEMM for MLX-quantized weights (quant_mma.h): y[M, N] = x[M, K] ·
// dequant(w)[N, K]ᵀ (+ bias) for 1..16 rows — and up to 128 as row groups of 16 or 32 rows, each
// a block's rows (kRowGroups) — 4- or 8-bit codes, bf16 scales and biases.
//
// Computed as yᵀ = dequant(w) · xᵀ on mma.m16n8k16 (bf16 in, f32 accumulate): w's rows are the
// mma's 16 rows (y's columns), x's rows its 8 columns (MT n-tiles: two for 9..16 rows, four for a
// 32-row group). A block of 4 warps owns 64 consecutive w rows (16 per warp) and a range of K (its
// split), walked in chunks of 16 bytes of codes per lane and row (4-bit: 128 k, 8-bit: 64 k):
//  - codes go from global memory straight into registers, kDepth chunks ahead (evict-first: each
//    code is read once) — or, one row with kSmemCodes, by cp.async through a warp's ring of
//    kSmemCodeDepth chunks — the first ones before waiting for the kernel before this one (PDL);
//    thread (g, c) of a warp (g = lane / 4, c = lane % 4) loads 16 bytes at k = c·(chunk / 4) of
//    rows g and g + 8, so the four lanes of a row read 64 contiguous bytes;
//  - each lane turns its codes into bf16 pairs in registers, the A fragments, with its own group's
//    scale and bias (a lane's 32 or 16 codes lie in one group of 32, 64 or 128);
//  - x arrives in f32 pages of 256 k per row by cp.async (3 pages in flight, 2 for 32-row blocks;
//    16-byte units stored lane-major, see kRowUnits, so a lane's fragment reads are fixed offsets
//    from one base and hit distinct banks) and each lane rounds its B fragments to bf16 from there;
//    rows past M are zeros written once, never copied (at 1-8 rows their lanes read nothing). Or
//    (kHalfX, 9+ rows) x arrives already rounded to bf16 by its producer (ops::matmul_input_dtype):
//    half the bytes and shared-memory reads, one 16-byte read for both k-steps of a word and an
//    n-tile, byte permutes in place of the conversions — the same mma operands, so the same bits.
// Several weights over the same x (q/k/v, gate/up) share one launch: grid blocks are dealt out
// to the targets in order, each target with its own split of K (its outputs are the bits of its
// own launch).
// The mma's k order is a permutation of a chunk's k, the same for the codes and x (a sum does not
// care about the order of its terms; the tensor core's accumulation order is its own, the same for
// every column):
//  - 4-bit: word j of a lane's 16 bytes holds codes k0 .. k0 + 7 (k0 = 32c + 8j); the nibble pairs
//    (0, 4), (1, 5), (2, 6), (3, 7) are one mask-and-or each (bits 4p and 16 + 4p into the mantissa
//    of bf16 128: 128 + q exactly), minus 128 and times scale plus bias in one bf16x2 FMA each;
//    k-step s of word j takes pairs 2s (fragment columns 2c, 2c + 1) and 2s + 1 (2c + 8, 2c + 9),
//    and x's B fragments pair the same k.
//  - 8-bit: word j holds codes k0 .. k0 + 3 (k0 = 16c + 4j), made exact f32 by a byte permute under
//    2^23, dequantized by an f32 FMA and rounded to bf16 pairs (0, 1) and (2, 3): k-step j.
// Measured (H200, 8B mlx4, docs/benchmarks.md): 2.3× the f32 GEMV at batch 1, 4.1× at 8; gate/up
// at 1.6 TB/s, 261 instructions per warp chunk, 4 blocks per SM by registers.
// Splits: with fewer column tiles than the GPU wants blocks, K is cut into `splits` ranges of whole
// pages; each block writes its partial sums, and the last block of a tile to finish (a ticket per
// tile) adds the splits in split order into y and resets the ticket.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/quant_mma.h"

// The kernel and its layouts; quant_mma.cu plans the splits and launches it.
namespace ringlm::cuda::quant_mma_detail {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileCols = 16 * kWarps;  // w rows (y columns) per block: one mma m-tile per warp
constexpr int kPageK = 256;             // k per x page
constexpr int kPageUnits = kPageK / 4;  // 16-byte f32 units per x row of a page
// k per 16-byte unit of x: 4 f32 or 8 bf16 (kHalfX).
template <bool kHalfX>
constexpr int unit_k() {
  return kHalfX ? 8 : 4;
}
constexpr int kXStages = 3;  // x pages in flight (shared memory)
constexpr int kDepth = 4;    // chunks of codes in flight per thread
// Staged scales: a page's scales and biases of the block's rows in shared memory, up to 8 groups
// (group size 32) per row and page.
constexpr int kPageGroupsMax = kPageK / 32;
constexpr int kScaleStageWords = 2 * kTileCols * kPageGroupsMax / 2;  // u32 words: scales, biases
// x pages in flight for MT n-tiles of rows: f32 32-row blocks (MT = 4) keep two, so that three
// blocks fit an SM's shared memory (2 × 34 KB of x pages each; bf16 pages are half that).
template <int MT, bool kHalfX = false>
constexpr int x_stages() {
  return MT == 4 && !kHalfX ? 2 : kXStages;
}

template <int BITS>
struct Chunking {
  static constexpr int kChunkK = 512 / BITS;  // 16 bytes of codes per lane and row, 4 lanes
  static constexpr int kLaneK = kChunkK / 4;  // codes per lane and row: 32 or 16
  static constexpr int kChunksPerPage = kPageK / kChunkK;
  static_assert(kDepth % kChunksPerPage == 0, "a page starts at a fixed slot of the code ring");
};
// kSmemCodes (one row): a warp's codes go by cp.async into its own ring of kSmemCodeDepth chunks
// in shared memory (a chunk: rows g and g + 8 of its 32 lanes, 16 bytes each) instead of a
// register ring of kDepth, so that the bytes in flight no longer cost registers; each x page is
// copied with the codes of its first chunk, so a warp holds kSmemCodeDepth / chunks per page + 1
// x pages.
constexpr int kSmemCodeDepth = 8;
constexpr int kCodeChunkUnits = 2 * 32;
template <int BITS>
constexpr int smem_code_x_stages() {
  static_assert(kSmemCodeDepth % Chunking<BITS>::kChunksPerPage == 0, "pages start at fixed slots");
  return kSmemCodeDepth / Chunking<BITS>::kChunksPerPage + 1;
}

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
  const void* x;         // F32[M, ldx], or BF16[M, ldx] (kHalfX kernels)
  unsigned* tickets;     // [row_groups][column tiles of all targets], zero between launches
  int64_t ldx, row_words;
  int groups, group_shift;  // group = k >> group_shift
  int M, K;
  int row_groups;         // groups of kGroupRows rows (1 up to kQuantMmaMaxRows rows)
  int tickets_per_group;  // column tiles of all targets
  bool subnormal_codes;   // 4-bit, 1-8 rows: dequant_subnormal_word where the scales fit
};

// Rows a block multiplies: calls of more rows (quant_mma_row_groups()) give each group of
// kGroupRows rows (32 with wide groups: quant_mma_wide_groups()) its own blocks, adjacent in the
// grid to the same tile's other groups so that their codes come from L2 after the first group's
// read.
constexpr int kGroupRows = static_cast<int>(kQuantMmaMaxRows);

// The target that owns grid block `block`.
__device__ __forceinline__ MmaTarget target_of(const MmaArgs& a, int block) {
  MmaTarget t = a.t0;
  if (block >= a.t1.block_begin) t = a.t1;
  if (block >= a.t2.block_begin) t = a.t2;
  return t;
}

// x pages in shared memory: a row is kRowUnits 16-byte f32 units (4 of padding). Within each
// chunk's span the units are stored lane-major-last: unit (c, i) — the i-th unit of lane c's
// k-range — at i·4 + c, so a lane reads its fragments at fixed offsets from one base, and the 8
// lanes of a quarter-warp (c = 0..3, rows g of both parities: the row stride is 4 mod 8 units)
// hit 8 distinct 16-byte bank groups.
constexpr int kRowUnits = kPageUnits + 4;
template <bool kHalfX>
constexpr int row_units() {  // a stage's row: the page's units and 4 of padding (4 mod 8)
  return kPageK / unit_k<kHalfX>() + 4;
}
// A warp's private pages (kWarpX, one row): stages of 72 units (0 mod 8: every warp's the same),
// then (kWarpScales) its rows' scales and biases per stage, [scale, bias][16][kPageGroupsMax]
// bf16 bits (32 units).
constexpr int kWarpXStageUnits = 72;
constexpr int kWarpScaleStageUnits = 2 * 16 * kPageGroupsMax * 2 / 16;
template <int BITS, bool kSmemCodes>
constexpr int warp_x_stages() {
  return kSmemCodes ? smem_code_x_stages<BITS>() : kXStages;
}
// A warp's share: its x stages (and their scales), then (kSmemCodes) its code ring.
template <int BITS, bool kWarpScales, bool kSmemCodes = false>
constexpr int warp_x_units() {
  return warp_x_stages<BITS, kSmemCodes>() *
             (kWarpXStageUnits + (kWarpScales ? kWarpScaleStageUnits : 0)) +
         (kSmemCodes ? kSmemCodeDepth * kCodeChunkUnits : 0);
}
template <int BITS, bool kHalfX = false>
__device__ __forceinline__ int stored_unit(int u) {  // u: the unit's index in its page row
  constexpr int kChunkUnits = Chunking<BITS>::kChunkK / unit_k<kHalfX>();
  constexpr int kLaneUnits = kChunkUnits / 4;
  const int chunk = u / kChunkUnits, w = u % kChunkUnits;
  return chunk * kChunkUnits + (w % kLaneUnits) * 4 + w / kLaneUnits;
}

// One chunk of a lane's codes: 16 bytes of rows g and g + 8 and (unless staged through shared
// memory) their groups' scale and bias.
struct Chunk {
  uint4 a, b;
  uint32_t scale_a, bias_a, scale_b, bias_b;  // bf16 bits
};
struct ScaleBias {
  uint32_t scale_a, bias_a, scale_b, bias_b;  // bf16 bits
};

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

// Nibbles p and p + 4 of a 4-bit word dequantized: bf16(s·q + b) in the low and high half.
template <int P>
__device__ __forceinline__ uint32_t dequant_nibbles(uint32_t w, __nv_bfloat162 scale,
                                                    __nv_bfloat162 bias) {
  uint32_t magic;  // (w >> 4P) & 0x000F000F | 0x43004300: bf16 128 + q in each half
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;"
      : "=r"(magic)
      : "r"(w >> (4 * P)), "r"(0x000F000Fu), "r"(0x43004300u));
  const __nv_bfloat162 q = __hsub2(as_bf162(magic), as_bf162(0x43004300u));  // exact
  return as_u32(__hfma2(q, scale, bias));
}

// The 8 codes of a 4-bit word dequantized as the pairs (p, p + 4), p = 0..3.
__device__ __forceinline__ void dequant_word(uint32_t w, __nv_bfloat162 scale, __nv_bfloat162 bias,
                                             uint32_t (&pairs)[4]) {
  pairs[0] = dequant_nibbles<0>(w, scale, bias);
  pairs[1] = dequant_nibbles<1>(w, scale, bias);
  pairs[2] = dequant_nibbles<2>(w, scale, bias);
  pairs[3] = dequant_nibbles<3>(w, scale, bias);
}

// Subnormal codes (1-8 rows, when MmaArgs::subnormal_codes): the nibbles masked into bf16
// subnormals q·2^-133 (exact: bf16's smallest subnormal is 2^-133) times the scale's bits with 133
// added to the exponent field, s·2^133 — the product is q·s exactly, so one FMA rounds q·s + b
// once, as dequant_nibbles does, without its subtraction of 128: the same bits, 3 instructions a
// pair instead of 4. It needs s·2^133 to be a normal bf16: exponent fields 1..121, 2^-126 <= |s| <
// 2^-5 (a warp takes this path for a chunk only when every lane's scales fit).
__device__ __forceinline__ bool subnormal_codes_fit(uint32_t scale_bits) {
  return ((scale_bits >> 7) & 0xFFu) - 1u < 121u;
}
__device__ __forceinline__ uint32_t scale_times_2_133(uint32_t scale_bits) {
  return scale_bits + (133u << 7);
}
template <int P>
__device__ __forceinline__ uint32_t dequant_subnormal_nibbles(uint32_t w,
                                                              __nv_bfloat162 scale_2_133,
                                                              __nv_bfloat162 bias) {
  const uint32_t q = (w >> (4 * P)) & 0x000F000Fu;  // q·2^-133 in each half
  return as_u32(__hfma2(as_bf162(q), scale_2_133, bias));
}
__device__ __forceinline__ void dequant_subnormal_word(uint32_t w, __nv_bfloat162 scale_2_133,
                                                       __nv_bfloat162 bias, uint32_t (&pairs)[4]) {
  pairs[0] = dequant_subnormal_nibbles<0>(w, scale_2_133, bias);
  pairs[1] = dequant_subnormal_nibbles<1>(w, scale_2_133, bias);
  pairs[2] = dequant_subnormal_nibbles<2>(w, scale_2_133, bias);
  pairs[3] = dequant_subnormal_nibbles<3>(w, scale_2_133, bias);
}

// Byte E of an 8-bit word as an exact float (2^23 + q built by a byte permute, 2^23 subtracted).
template <int E>
__device__ __forceinline__ float code_byte(uint32_t w) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | E)) - 8388608.0f;
}

// Bytes E and E + 1 of an 8-bit word dequantized in f32 (s·q + b) and rounded to a bf16 pair.
template <int E>
__device__ __forceinline__ uint32_t dequant_bytes(uint32_t w, float scale, float bias) {
  return device::pack2<__nv_bfloat16>(fmaf(scale, code_byte<E>(w), bias),
                                      fmaf(scale, code_byte<E + 1>(w), bias));
}

__device__ __forceinline__ float bf16_bits_to_f32(uint32_t bits) {
  return __uint_as_float(bits << 16);
}

// 4 bytes global -> shared (cp.async.ca: sizes below 16 bytes go through L1).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem) : "memory");
}

// 16 bytes global -> shared through L1 (cp.async.ca). Every x copy takes it: all blocks of a
// launch read the same x, and through L2 alone (cp.async.cg) those few lines were the bottleneck
// — through L1, where a block's warps and the SM's blocks share them, steps ran 1.1-1.47x at 2-16
// rows (H100, mlx4/mlx8 8B; docs/benchmarks.md, twenty-sixth session).
__device__ __forceinline__ void cp_async16_ca(void* smem, const void* gmem) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}

// Waits until at most `pending` (<= kMax) of this thread's cp.async groups are in flight; `pending`
// known at compile time (an unrolled loop's index) folds to one wait.
template <int kMax>
__device__ __forceinline__ void cp_async_wait_at_most(int pending) {
  if constexpr (kMax > 0) {
    if (pending < kMax) return cp_async_wait_at_most<kMax - 1>(pending);
  }
  device::cp_async_wait<kMax>();
}

// Registers for 4 blocks per SM, or 3 where shared memory fits no more anyway: 32-row blocks and
// the staged 16-row blocks (3 x 57 KB of x pages and scales), which at 4 spilled 28-36 bytes.
template <int MT, bool kStaged>
constexpr int quant_mma_min_blocks() {
  return MT == 4 || (MT == 2 && kStaged) ? 3 : 4;
}

// kStaged: scales and biases come with each x page through shared memory (one 4-byte copy per
// two groups of a row) instead of four 2-byte global loads per lane and chunk (Nsight: 39 % of
// the sectors the kernel requested were these loads' excess).
// kWarpX (one row): each warp copies its own x pages, so a page costs a __syncwarp instead of a
// block barrier (Nsight, mlx4 gate/up at one row: 13 % of the warps' cycles stalled at the page
// barrier); lanes g > 0 take zeros without a read (x_unit). The copies go through L1, where the
// block's four warps share them: through L2 alone, four times the requests on the same few lines of
// x (every block reads them) made whole steps 0.58x (H100, docs/benchmarks.md). The same loads into
// the same arithmetic: the same bits.
// kRowGroups (17 to quant_mma_grouped_rows() rows): the block's rows are its group's (a separate
// instantiation: the group arithmetic costs the 1-16-row kernels registers).
// kHalfX: x is bf16 (staged scales, 9+ rows only: the producers write bf16 matmul inputs there).
// kWarpScales (kWarpX): each warp copies its 16 rows' scale and bias words of a page with its x
// page (a lane per row and plane, `words` 4-byte copies each) instead of four 2-byte global loads
// per lane and chunk (Nsight, mlx4 gate/up at one row: those loads were twice the code loads' L1
// tag requests, and the first use of a chunk's scale drew 17 % of the stall samples).
// kSmemCodes (kWarpX): codes through the warp's shared-memory ring (kSmemCodeDepth above; one row
// spent 45 % of its stall samples on long-scoreboard waits with 4 chunks in registers).
template <int BITS, int MT, bool kStaged, bool kWarpX, bool kRowGroups, bool kHalfX = false,
          bool kWarpScales = false, bool kSmemCodes = false>
__global__ void __launch_bounds__(kThreads, quant_mma_min_blocks<MT, kStaged>())
    quant_mma_kernel(const MmaArgs a) {
  static_assert(!kWarpX || (MT == 1 && !kStaged), "warp-private x pages: one row, no staging");
  static_assert(!kWarpScales || kWarpX, "warp-private scales: with warp-private x pages");
  static_assert(!kSmemCodes || kWarpX, "codes through shared memory: with warp-private x pages");
  static_assert(kRowGroups ? MT == 2 || MT == 4 : MT <= 2, "row groups: 16 or 32 rows a block");
  static_assert(!kHalfX || (kStaged && MT >= 2), "bf16 x: staged scales, 9+ rows");
  constexpr int kStages = kWarpX ? warp_x_stages<BITS, kSmemCodes>() : x_stages<MT, kHalfX>();
  constexpr int kXRowUnits = row_units<kHalfX>();
  constexpr int kXPageUnits = kPageK / unit_k<kHalfX>();
  constexpr int kXBytes = kHalfX ? 2 : 4;
  constexpr int kBlockRows = kRowGroups ? 8 * MT : kGroupRows;  // rows of a group
  using C = Chunking<BITS>;
  constexpr int kRows = 8 * MT;  // x rows a stage holds (M rounded up to the mma's 8)
  constexpr int kStageUnits = kWarpX ? kWarpXStageUnits : kRows * kXRowUnits;
  constexpr int kChunkUnits = C::kChunkK / unit_k<kHalfX>();
  // [kStages][kRows][kXRowUnits], then the staged scales
  // ([kStages][scale, bias][kTileCols][kPageGroupsMax] bf16 bits, kStaged); kWarpX: per warp
  // [kStages][kWarpXStageUnits], then (kWarpScales) [kStages][kWarpScaleStageUnits], then
  // (kSmemCodes) [kSmemCodeDepth][row g, row g + 8][32 lanes] uint4.
  extern __shared__ __align__(16) float4 xs[];
  auto* staged = reinterpret_cast<uint16_t*>(xs + kStages * kStageUnits);
  __shared__ bool last_block;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  float4* const x_pages = kWarpX ? xs + warp * warp_x_units<BITS, kWarpScales, kSmemCodes>() : xs;
  // kWarpScales: [kStages][scale, bias][16][kPageGroupsMax]
  auto* const warp_scales = reinterpret_cast<uint16_t*>(x_pages + kStages * kWarpXStageUnits);
  auto* const code_ring = reinterpret_cast<uint4*>(
      x_pages + kStages * (kWarpXStageUnits + (kWarpScales ? kWarpScaleStageUnits : 0)));
  const int g = lane >> 2, c = lane & 3;
  const int row_groups = kRowGroups ? a.row_groups : 1;
  const int block = static_cast<int>(blockIdx.x) / row_groups;
  const int m0 = kBlockRows * (static_cast<int>(blockIdx.x) % row_groups);  // the group's row 0
  const int group_rows = kRowGroups ? min(a.M - m0, kBlockRows) : 0;
  // The block's rows x[m0 .. m0 + rows()) (a.M read where used without groups: the same code as
  // before them).
  const auto rows = [&] { return kRowGroups ? group_rows : a.M; };
  const MmaTarget T = target_of(a, block);
  const int tile = (block - T.block_begin) % T.tiles, split = (block - T.block_begin) / T.tiles;
  const int first_page = split * T.pages_per_split;
  const int pages = min(T.pages_per_split, a.K / kPageK - first_page);  // >= 1 by the plan
  const int count = pages * C::kChunksPerPage;
  const int first = first_page * C::kChunksPerPage;
  const int row0 = tile * kTileCols + 16 * warp;
  // Rows past N (the last tile only) re-read row N - 1 and are never stored.
  const int64_t ra = min(row0 + g, T.N - 1), rb = min(row0 + g + 8, T.N - 1);
  const uint4* wa = reinterpret_cast<const uint4*>(T.codes + ra * a.row_words) + first * 4 + c;
  const uint4* wb = reinterpret_cast<const uint4*>(T.codes + rb * a.row_words) + first * 4 + c;
  const uint16_t* sa = T.scales + ra * a.groups;
  const uint16_t* sb = T.scales + rb * a.groups;
  const uint16_t* ba = T.biases + ra * a.groups;
  const uint16_t* bb = T.biases + rb * a.groups;
  const int lane_k = first * C::kChunkK + c * C::kLaneK;  // the lane's first k
  const auto load_w = [&](int i, Chunk& d) {
    if (i >= count) return;
    if constexpr (kSmemCodes) {  // slot i mod the depth; each lane reads back only its own copies
      uint4* slot = code_ring + (i & (kSmemCodeDepth - 1)) * kCodeChunkUnits;
      device::cp_async16(slot + lane, wa + i * 4, true);
      device::cp_async16(slot + 32 + lane, wb + i * 4, true);
    } else {
      d.a = __ldcs(wa + i * 4);
      d.b = __ldcs(wb + i * 4);
    }
    if constexpr (kStaged || kWarpScales) return;
    const int group = (lane_k + i * C::kChunkK) >> a.group_shift;
    d.scale_a = __ldg(sa + group);
    d.bias_a = __ldg(ba + group);
    d.scale_b = __ldg(sb + group);
    d.bias_b = __ldg(bb + group);
  };
  // Codes are no earlier kernel's output: their first loads go out before the wait (kSmemCodes:
  // one cp.async group).
  constexpr int kCodeDepth = kSmemCodes ? kSmemCodeDepth : kDepth;
  Chunk wv[kCodeDepth];
#pragma unroll
  for (int p = 0; p < kCodeDepth; ++p) load_w(p, wv[p]);
  if constexpr (kSmemCodes) device::cp_async_commit();
  // x rows past M read as zeros in every stage (load_x writes real rows only); at MT = 1 the
  // lanes of those rows read nothing (x_unit).
  if constexpr (MT > 1) {
    for (int v = static_cast<int>(threadIdx.x); v < kStages * kStageUnits; v += kThreads) {
      if ((v / kXRowUnits) % kRows >= rows()) xs[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  device::wait_prior_grid();
  device::launch_dependents();

  // This thread's share of a page's x copies, fixed for the kernel: unit copy_unit (and + 32 for a
  // warp's copies) of rows copy_row, copy_row + kCopyRowStep, ... — the index arithmetic once here
  // instead of per page and unit (not with kStaged: the kernel is at its register limit there, and
  // the precomputed offsets spill: 0.99x at 16 rows).
  constexpr int kCopiers = kWarpX ? 32 : kThreads;
  constexpr int kCopyUnits = kCopiers >= kPageUnits ? 1 : kPageUnits / kCopiers;  // per row
  constexpr int kCopyRowStep = kCopiers >= kPageUnits ? kCopiers / kPageUnits : 1;
  const int copier = kWarpX ? lane : static_cast<int>(threadIdx.x);
  const int copy_row = copier / kPageUnits, copy_unit = copier % kPageUnits;
  const float* const copy_src =  // + page's k0 (f32 x)
      static_cast<const float*>(a.x) + (m0 + copy_row) * a.ldx + 4 * copy_unit;
  const int copy_dst = copy_row * kRowUnits + stored_unit<BITS>(copy_unit);
  const auto load_x = [&](int page) {  // page into stage page % kStages; real rows only
    if (page < pages) {  // kSmemCodes: the page of chunk i + kSmemCodeDepth, possibly past the end
      const int64_t k0 = int64_t{first_page + page} * kPageK;
      float4* stage = x_pages + (page % kStages) * kStageUnits;
      if constexpr (kStaged) {
        // The thread's unit is the same in every row it copies (kThreads is a multiple of a
        // row's units): rows first_row, first_row + kRowStep, ... — their addresses once per page,
        // then a step per row (a division and multiplications per unit were a fifth of the 64-row
        // kernel's instructions; H100, mlx4 8B: steps of 16-96 rows 1.08-1.09x, mlx8 16 / 64
        // rows 1.06x).
        static_assert(kThreads % kXPageUnits == 0, "a thread copies one unit of its rows");
        constexpr int kRowStep = kThreads / kXPageUnits;
        const int first_row = static_cast<int>(threadIdx.x / unsigned{kXPageUnits});
        const int page_unit = static_cast<int>(threadIdx.x % unsigned{kXPageUnits});
        const int64_t src_step = kRowStep * a.ldx * kXBytes;
        const char* src = static_cast<const char*>(a.x) +
                          ((m0 + first_row) * a.ldx + k0 + unit_k<kHalfX>() * page_unit) * kXBytes;
        float4* dst = stage + first_row * kXRowUnits + stored_unit<BITS, kHalfX>(page_unit);
        for (int r = first_row; r < rows(); r += kRowStep) {
          cp_async16_ca(dst, src);
          src += src_step;
          dst += kRowStep * kXRowUnits;
        }
      } else {
        const float* src = copy_src + k0;
        float4* dst = stage + copy_dst;
        for (int r = copy_row; r < rows(); r += kCopyRowStep) {
#pragma unroll
          for (int i = 0; i < kCopyUnits; ++i) {
            const int at =
                i == 0 ? 0
                       : stored_unit<BITS>(copy_unit + i * kCopiers) - stored_unit<BITS>(copy_unit);
            cp_async16_ca(dst + at, src + 4 * i * kCopiers);
          }
          src += kCopyRowStep * a.ldx;
          dst += kCopyRowStep * kRowUnits;
        }
      }
      if constexpr (kWarpScales) {
        // Lane l: plane l / 16 (scales, biases), the warp's row l % 16; the row's `words` words
        // of two groups each.
        const int words = (kPageK >> a.group_shift) / 2;
        const int64_t row = min(row0 + (lane & 15), T.N - 1);
        const uint16_t* src =
            (lane < 16 ? T.scales : T.biases) + row * a.groups + (k0 >> a.group_shift);
        uint16_t* dst = warp_scales + ((page % kStages) * 32 + lane) * kPageGroupsMax;
        for (int w = 0; w < words; ++w) cp_async4(dst + 2 * w, src + 2 * w);
      }
      if constexpr (kStaged) {
        // Row r's groups of the page: words of two groups each (groups per row are even), a
        // power of two (1 to 4), so that a thread's word w is the same in all its copies and
        // a copy's plane and row are shifts (a division by `words` per copy cost ~70
        // instructions). Copy v: plane and row (v >> words_shift), word v & (words - 1).
        static_assert(2 * kTileCols == kThreads, "a copy per thread and staged word of a row");
        const int words_shift = 7 - a.group_shift;  // log2((kPageK >> group_shift) / 2)
        const int words = 1 << words_shift;
        const int64_t group0 = k0 >> a.group_shift;
        uint16_t* dst = staged + (page % kStages) * 2 * kTileCols * kPageGroupsMax;
        const unsigned copier = threadIdx.x;
        const int w = static_cast<int>(copier) & (words - 1);
        for (int slot = static_cast<int>(copier >> words_shift); slot < 2 * kTileCols;
             slot += kThreads >> words_shift) {
          const int which = slot / kTileCols, r = slot % kTileCols;  // powers of two
          const int64_t row = min(tile * kTileCols + r, T.N - 1);
          const uint16_t* src = (which == 0 ? T.scales : T.biases) + row * a.groups + group0;
          cp_async4(dst + slot * kPageGroupsMax + 2 * w, src + 2 * w);
        }
      }
    }
    device::cp_async_commit();  // empty groups keep the wait counts uniform
  };
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) load_x(p);

  float acc[MT][4];
#pragma unroll
  for (int t = 0; t < MT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  // acc[t] += (the warp's 16 rows of dequant(w)) · (x rows 8t .. 8t + 7)ᵀ over chunk ci of a page.
  // The scale and bias of rows g and g + 8 for chunk ci of the page in `stage`.
  const auto scale_bias = [&](int stage, int ci, const Chunk& d) {
    if constexpr (kWarpScales) {  // rows g and g + 8 of the warp's 16; biases 16 rows on
      const int at =
          (stage * 32 + g) * kPageGroupsMax + ((ci * C::kChunkK + c * C::kLaneK) >> a.group_shift);
      constexpr int kBias = 16 * kPageGroupsMax, kRowB = 8 * kPageGroupsMax;
      return ScaleBias{warp_scales[at], warp_scales[at + kBias], warp_scales[at + kRowB],
                       warp_scales[at + kBias + kRowB]};
    }
    if constexpr (!kStaged) return ScaleBias{d.scale_a, d.bias_a, d.scale_b, d.bias_b};
    // Row g of the warp's rows in the page's stage; the bias plane follows the scale plane.
    const int at = stage * 2 * kTileCols * kPageGroupsMax + (16 * warp + g) * kPageGroupsMax +
                   ((ci * C::kChunkK + c * C::kLaneK) >> a.group_shift);
    constexpr int kBias = kTileCols * kPageGroupsMax, kRowB = 8 * kPageGroupsMax;
    return ScaleBias{staged[at], staged[at + kBias], staged[at + kRowB],
                     staged[at + kBias + kRowB]};
  };
  const auto consume = [&](const float4* stage, int ci, const ScaleBias& d, const Chunk& w) {
    // xr[t][4i]: unit i of lane c's k-range in the chunk, x row 8t + g.
    const float4* xr[MT];
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const float4* row = kWarpX ? stage : stage + (8 * t + g) * kXRowUnits;
      xr[t] = row + ci * kChunkUnits + c;
    }
    // MT = 1 (f32 x): lanes of rows past M take zeros without a shared-memory read — at one
    // row 28 of a warp's 32 lanes, so a 16-byte read is one wavefront instead of four (Nsight,
    // mlx4 gate/up at one row: two thirds of the launch's shared-memory wavefronts; H100, mlx4
    // 8B: steps 1.02x at one row, 1.01x at two).
    const auto x_unit = [&](const float4* p) {
      if constexpr (MT == 1) {
        return g < rows() ? *p : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      } else {
        return *p;
      }
    };
    if constexpr (BITS == 4 && kHalfX) {
      const __nv_bfloat162 scale_a = as_bf162(bf16_pair(d.scale_a));
      const __nv_bfloat162 bias_a = as_bf162(bf16_pair(d.bias_a));
      const __nv_bfloat162 scale_b = as_bf162(bf16_pair(d.scale_b));
      const __nv_bfloat162 bias_b = as_bf162(bf16_pair(d.bias_b));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t pa[4], pb[4];
        dequant_word(word(w.a, j), scale_a, bias_a, pa);
        dequant_word(word(w.b, j), scale_b, bias_b, pb);
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          // x[k0 .. k0 + 7] as bf16; the B fragments pair k0 + i with k0 + i + 4, as the codes.
          const uint4 v = *reinterpret_cast<const uint4*>(xr[t] + 4 * j);
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const uint32_t frag[4] = {pa[2 * s], pb[2 * s], pa[2 * s + 1], pb[2 * s + 1]};
            const uint32_t lo = s == 0 ? v.x : v.y, hi = s == 0 ? v.z : v.w;
            device::mma16816<__nv_bfloat16>(acc[t], frag, __byte_perm(lo, hi, 0x5410),
                                            __byte_perm(lo, hi, 0x7632));
          }
        }
      }
    } else if constexpr (kHalfX) {  // 8-bit codes
      const float scale_a = bf16_bits_to_f32(d.scale_a), bias_a = bf16_bits_to_f32(d.bias_a);
      const float scale_b = bf16_bits_to_f32(d.scale_b), bias_b = bf16_bits_to_f32(d.bias_b);
#pragma unroll
      for (int i = 0; i < 2; ++i) {  // words 2i and 2i + 1: unit i of the lane's range
        uint32_t frag[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t wa_j = word(w.a, 2 * i + h), wb_j = word(w.b, 2 * i + h);
          frag[h][0] = dequant_bytes<0>(wa_j, scale_a, bias_a);
          frag[h][1] = dequant_bytes<0>(wb_j, scale_b, bias_b);
          frag[h][2] = dequant_bytes<2>(wa_j, scale_a, bias_a);
          frag[h][3] = dequant_bytes<2>(wb_j, scale_b, bias_b);
        }
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const uint4 v = *reinterpret_cast<const uint4*>(xr[t] + 4 * i);  // x[k0 .. k0 + 7]
          device::mma16816<__nv_bfloat16>(acc[t], frag[0], v.x, v.y);
          device::mma16816<__nv_bfloat16>(acc[t], frag[1], v.z, v.w);
        }
      }
    } else if constexpr (BITS == 4) {
      const __nv_bfloat162 bias_a = as_bf162(bf16_pair(d.bias_a));
      const __nv_bfloat162 bias_b = as_bf162(bf16_pair(d.bias_b));
      // Word j's pairs of rows g (pa) and g + 8 (pb) times x's k0 .. k0 + 7.
      const auto mma_word = [&](int j, const uint32_t(&pa)[4], const uint32_t(&pb)[4]) {
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          // k0 .. k0 + 3, k0 + 4 .. k0 + 7
          const float4 lo = x_unit(xr[t] + 8 * j), hi = x_unit(xr[t] + 8 * j + 4);
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const uint32_t frag[4] = {pa[2 * s], pb[2 * s], pa[2 * s + 1], pb[2 * s + 1]};
            const uint32_t b0 = s == 0 ? device::pack2<__nv_bfloat16>(lo.x, hi.x)
                                       : device::pack2<__nv_bfloat16>(lo.z, hi.z);
            const uint32_t b1 = s == 0 ? device::pack2<__nv_bfloat16>(lo.y, hi.y)
                                       : device::pack2<__nv_bfloat16>(lo.w, hi.w);
            device::mma16816<__nv_bfloat16>(acc[t], frag, b0, b1);
          }
        }
      };
      // The chunk with dequant(word, scale pair, bias pair, pairs) and the scales it takes.
      const auto multiply = [&](auto dequant, uint32_t scale_a_bits, uint32_t scale_b_bits) {
        const __nv_bfloat162 scale_a = as_bf162(bf16_pair(scale_a_bits));
        const __nv_bfloat162 scale_b = as_bf162(bf16_pair(scale_b_bits));
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t pa[4], pb[4];
          dequant(word(w.a, j), scale_a, bias_a, pa);
          dequant(word(w.b, j), scale_b, bias_b, pb);
          mma_word(j, pa, pb);
        }
      };
      if constexpr (MT == 1) {
        if (a.subnormal_codes && __all_sync(0xFFFFFFFFu, subnormal_codes_fit(d.scale_a) &&
                                                             subnormal_codes_fit(d.scale_b))) {
          multiply([](uint32_t v, __nv_bfloat162 s, __nv_bfloat162 b,
                      uint32_t(&p)[4]) { dequant_subnormal_word(v, s, b, p); },
                   scale_times_2_133(d.scale_a), scale_times_2_133(d.scale_b));
          return;
        }
      }
      multiply([](uint32_t v, __nv_bfloat162 s, __nv_bfloat162 b,
                  uint32_t(&p)[4]) { dequant_word(v, s, b, p); },
               d.scale_a, d.scale_b);
    } else {
      const float scale_a = bf16_bits_to_f32(d.scale_a), bias_a = bf16_bits_to_f32(d.bias_a);
      const float scale_b = bf16_bits_to_f32(d.scale_b), bias_b = bf16_bits_to_f32(d.bias_b);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t wa_j = word(w.a, j), wb_j = word(w.b, j);
        const uint32_t frag[4] = {
            dequant_bytes<0>(wa_j, scale_a, bias_a), dequant_bytes<0>(wb_j, scale_b, bias_b),
            dequant_bytes<2>(wa_j, scale_a, bias_a), dequant_bytes<2>(wb_j, scale_b, bias_b)};
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const float4 v = x_unit(xr[t] + 4 * j);  // k0 .. k0 + 3
          device::mma16816<__nv_bfloat16>(acc[t], frag, device::pack2<__nv_bfloat16>(v.x, v.y),
                                          device::pack2<__nv_bfloat16>(v.z, v.w));
        }
      }
    }
  };
  if constexpr (kSmemCodes) {
    // Iteration i consumes chunk i, then issues the group of chunk i + kSmemCodeDepth's codes
    // (and its page, when that chunk starts one). Chunk i's group is the prologue's for i below
    // the depth (i groups after it), else iteration i - kSmemCodeDepth's (depth - 1 after it).
    constexpr int kPerPage = C::kChunksPerPage;
    for (int i0 = 0; i0 < count; i0 += kSmemCodeDepth) {
#pragma unroll
      for (int p = 0; p < kSmemCodeDepth; ++p) {
        const int i = i0 + p;
        if (i >= count) break;
        if (i0 == 0) {
          cp_async_wait_at_most<kSmemCodeDepth - 1>(p);
        } else {
          device::cp_async_wait<kSmemCodeDepth - 1>();
        }
        // A page's first chunk: every lane's copies of it have landed, and every lane is done
        // with the stage that this iteration's page overwrites (the page before this one).
        if (p % kPerPage == 0) __syncwarp();
        const int page = i / kPerPage, stage = page % kStages;
        Chunk w;
        w.a = code_ring[p * kCodeChunkUnits + lane];
        w.b = code_ring[p * kCodeChunkUnits + 32 + lane];
        consume(x_pages + stage * kStageUnits, p % kPerPage, scale_bias(stage, p % kPerPage, wv[p]),
                w);
        load_w(i + kSmemCodeDepth, wv[p]);
        if (p % kPerPage == 0) {
          load_x(page + kSmemCodeDepth / kPerPage);  // commits the group
        } else {
          device::cp_async_commit();
        }
      }
    }
  } else {
    for (int i0 = 0; i0 < count; i0 += kDepth) {
#pragma unroll
      for (int p = 0; p < kDepth; ++p) {
        const int i = i0 + p;
        if (i >= count) break;
        constexpr int kPerPage = C::kChunksPerPage;
        const int page = i / kPerPage;
        if (p % kPerPage == 0) {  // i0 is a multiple of kDepth, so i starts a page exactly here
          device::cp_async_wait<kStages - 2>();  // this page's x has landed (this thread's copies)
          // ... every copier's (the block's, or the warp's), and every reader is done with the page
          // before
          if constexpr (kWarpX) {
            __syncwarp();
          } else {
            __syncthreads();
          }
          load_x(page + kStages - 1);
        }
        const int stage = page % kStages;
        consume(x_pages + stage * kStageUnits, p % kPerPage, scale_bias(stage, p % kPerPage, wv[p]),
                wv[p]);
        load_w(i + kDepth, wv[p]);
      }
    }
  }
  device::cp_async_wait<0>();

  // acc[t][e]: w row row0 + g (+ 8 for e >= 2), x row m0 + 8t + 2c (+ 1 for odd e).
  const auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int t = 0; t < MT; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = row0 + g + 8 * (e >> 1), m = 8 * t + 2 * c + (e & 1);
        if (n < T.N && m < rows()) f(acc[t][e], int64_t{m0 + m}, int64_t{n});
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
  unsigned* ticket = a.tickets + (m0 / kBlockRows) * a.tickets_per_group + T.ticket_begin + tile;
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
          part[q][t][e] =
              n < T.N && m < rows() ? __ldcg(plane_q + int64_t{m0 + m} * T.N + n) : 0.0f;
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

}  // namespace ringlm::cuda::quant_mma_detail
