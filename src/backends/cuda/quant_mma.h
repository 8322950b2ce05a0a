// The tensor-core decode GEMM for MLX-quantized weights behind cuda::matmul_quantized
// (quant_mma.cu). Internal to backends/cuda; plain C++.
//
// Decode steps of 1..16 rows multiply a few activation rows by every weight: the packed codes are
// the whole cost (4-bit: a quarter of bf16's bytes). The f32 GEMVs of quant_matmul.cu spend about
// four instructions per code per row and ran at 13-30 % of the H200's bandwidth; this kernel
// unpacks codes to bf16 pairs with a few bit operations and one fused multiply-add per pair, and
// leaves the products to mma.m16n8k16 (x's rows are the mma's 8 columns: one or two n-tiles).
//
// Precision: the dense GPU matmul's contract above its GEMV rows (cuda_ops.h): x and
// dequant(w) rounded to bf16 — dequant(w) = bf16(s·q + b) from the bf16 scale and bias — exact
// products, f32 accumulation. Row m of y depends only on x[m] and the shape (N, K), never on M or
// the other rows: the split of K is chosen from N and K, each mma column is one row's sum, and the
// splits are added in split order. So rows are the same bits alone or batched, for M in
// [1, kQuantMmaMaxRows] — and up to quant_mma_grouped_rows() with row groups (below), where each
// group of 16 rows is a 16-row call's blocks.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "ops/weight.h"

namespace ringlm::cuda {

constexpr int64_t kQuantMmaMaxRows = 16;
// Row groups: the most rows a call may have (the kernel's bound) and the default limits with
// 16-row groups only and with 32-row groups where they pay. 32-row groups beat the dequantized
// tiles to 128 rows on an H100 (3.35 TB/s; with bf16 x and cheap staged copies, thirtieth
// session: 1.40-1.48x at 80-96 rows, 1.15-1.21x at 112-128) but not past 64 on an H200 (4.8 TB/s,
// twenty-eighth session, before both), whose bandwidth speeds the tiles and not the groups'
// dequantization: the wide limit applies below kQuantMmaWideGroupsMaxGbps of DRAM bandwidth.
// The kernel's bound is 256 rows (the decode batches ringlm serves), so that same-binary A/Bs
// can try limits past 128 (RINGLM_CUDA_QUANT_MMA_GROUPED_ROWS).
constexpr int64_t kQuantMmaMaxGroupedRows = 256;
constexpr int64_t kQuantMmaDefaultGroupedRows = 64;
constexpr int64_t kQuantMmaDefaultWideGroupedRows = 128;
constexpr double kQuantMmaWideGroupsMaxGbps = 4000.0;

struct QuantMma {
  const Tensor* x;                // F32[M, K] (or BF16 at 9+ rows), rows may be strided
  const ops::QuantizedMatrix* w;  // [N, K]
  const Tensor* bias;             // F32|BF16|F16[N] or empty
  Tensor* y;                      // F32[M, N], rows may be strided
};

// Whether quant_mma() serves this call: 4- or 8-bit codes with BF16 scales, 1..16 rows
// (1..quant_mma_grouped_rows() with row groups), K a multiple of 256, 16-byte aligned codes and x
// rows (row stride a multiple of 4), and the kernel switched on. x may come already rounded to
// bf16 (ops::matmul_input_dtype) at 9+ rows with 4-byte aligned scales and biases: the same bits
// as its f32 values, half the bytes of x and of its shared-memory reads (the row-group kernels
// read each x page once per warp).
bool quant_mma_applies(const QuantMma& g);
// Runs `g` (quant_mma_applies must hold).
void quant_mma(const QuantMma& g);
// Two or three weights over the same x (q/k/v, gate/up) in one launch, each target's outputs the
// same bits as quant_mma() of it alone (each keeps its own split of K): every target applies on
// its own, with the same bits and group size.
bool quant_mma_many_applies(std::span<const QuantMma> targets);
void quant_mma_many(std::span<const QuantMma> targets);
// Whether matmuls of `rows` rows with q should take x already rounded to bf16
// (ops::matmul_input_dtype): quant_mma_half_x(), BF16 scales and 9+ rows, where quant_mma's bf16
// kernels (4-byte aligned scales and biases; false otherwise, so that the f32 kernels keep those
// calls) or the dequantized tiles (cuBLAS in bf16, past quant_mma's rows or where it declines)
// serve it.
bool quantized_matmul_takes_half_x(const ops::QuantizedMatrix& q, int64_t rows);

// Whether quant_mma_applies() may be true: on unless RINGLM_CUDA_QUANT_MMA=0 or
// set_quant_mma(false) (tests, same-binary A/Bs; CUDA graphs captured before keep what they
// captured).
bool quant_mma_enabled();
void set_quant_mma(bool enabled);
// Whether the kernel takes each page's scales and biases through shared memory at 9-16 rows (at
// 1-8 rows each lane loads its own; on unless RINGLM_CUDA_QUANT_MMA_STAGED_SCALES=0 or
// set_quant_mma_staged_scales(false)): the same bits.
bool quant_mma_staged_scales();
void set_quant_mma_staged_scales(bool enabled);
// Whether calls of 17..quant_mma_grouped_rows() rows run quant_mma as groups of 16 rows (each
// group's blocks read the codes again, from L2 when the same tile's groups run together) instead
// of dequantized tiles for cuBLAS: on unless RINGLM_CUDA_QUANT_MMA_ROW_GROUPS=0 or
// set_quant_mma_row_groups(false). H100, 8B mlx4 at 512 context: steps of 17 / 24 / 32 / 48 / 64
// rows 2.25 / 2.11 / 2.04 / 1.54 / 1.21x the tiles (mlx8: 2.15x at 32, 1.24x at 64; at 96 rows
// 0.89x: 16-row groups stop at 64; docs/benchmarks.md, twenty-seventh session).
bool quant_mma_row_groups();
void set_quant_mma_row_groups(bool enabled);
// Whether row groups may be 32 rows (a block's dequantized codes serve four n-tiles of 8 rows
// instead of two; x pages two in flight instead of three, 3 blocks per SM) instead of 16, where
// that pays: 17-32, 49-128 rows (a 32-row group costs ~1.6 16-row ones; H100, mlx4 8B:
// 1.07-1.15x at 24-80 rows, to 128 rows 1.15-1.48x the tiles; an H200's tiles won at 80-96 in
// the twenty-eighth session, before bf16 x): on unless
// RINGLM_CUDA_QUANT_MMA_WIDE_GROUPS=0 or set_quant_mma_wide_groups(false). The same bits either
// way (a row's sum does not depend on its group or n-tile).
bool quant_mma_wide_groups();
void set_quant_mma_wide_groups(bool enabled);
// The most rows row groups take: with wide groups 128 on devices of less than
// kQuantMmaWideGroupsMaxGbps, else 64; 64 without (past them the tiles' single dequantization of
// each code is cheaper); or RINGLM_CUDA_QUANT_MMA_GROUPED_ROWS (17..kQuantMmaMaxGroupedRows) read
// at start-up for same-binary A/Bs. A process constant (tests aside): a row's bits never depend on
// the batch it is in.
int64_t quant_mma_grouped_rows();
// Tests: the limit set to `rows` (17..kQuantMmaMaxGroupedRows), or back to the default with 0.
void set_quant_mma_grouped_rows(int64_t rows);
// Whether one-row calls give each warp its own x pages (a __syncwarp per page instead of a block
// barrier; H100, mlx4 8B: steps 1.05-1.06x at 512 x 1 and k8v3 at 32k x 1, and not faster at 2
// rows): on unless RINGLM_CUDA_QUANT_MMA_WARP_X=0 or set_quant_mma_warp_x(false). The same bits
// either way.
bool quant_mma_warp_x();
void set_quant_mma_warp_x(bool enabled);
// Whether those warps also copy their rows' scales and biases of each page into shared memory
// with the x page (4-byte aligned scales and biases only) instead of each lane loading its own
// per chunk: off unless RINGLM_CUDA_QUANT_MMA_WARP_SCALES=1 or set_quant_mma_warp_scales(true)
// (thirtieth session; not yet run on a GPU: wip/README.md). The same bits either way.
bool quant_mma_warp_scales();
void set_quant_mma_warp_scales(bool enabled);
// Whether those warps take their codes by cp.async into a shared-memory ring 8 chunks deep
// (8 KB a warp; x pages go with the codes of their first chunk) instead of 4 chunks in registers:
// off unless RINGLM_CUDA_QUANT_MMA_SMEM_CODES=1 or set_quant_mma_smem_codes(true) (thirty-first
// session; not yet run on a GPU: wip/README.md). The same bits either way.
bool quant_mma_smem_codes();
void set_quant_mma_smem_codes(bool enabled);
int64_t quant_mma_smem_codes_count();  // calls that took it
// Whether the producers of quantized matmuls' inputs (norms, the gated activation, the decode
// merge) write bf16 rows from 9 rows on (quantized_matmul_takes_half_x): on unless
// RINGLM_CUDA_QUANT_MMA_HALF_X=0 or set_quant_mma_half_x(false). The same bits either way. H100,
// 8B mlx4 at 512 context: steps of 16 / 32 / 64 / 96 rows 1.21 / 1.33 / 1.31 / 1.36x (the x
// reads had the kernel at 88 % of L1 throughput; gate/up at 64 rows 235 -> 161 us), 128 rows
// (tiles, no rounding pass) 1.03x; mlx8 16 / 64 rows 1.11 / 1.28x (docs/benchmarks.md,
// twenty-ninth session).
bool quant_mma_half_x();
void set_quant_mma_half_x(bool enabled);
// Whether 4-bit codes at 1-8 rows are dequantized as bf16 subnormals times the scale with 133
// added to its exponent (one FMA per pair of codes instead of a subtraction and an FMA), in the
// chunks where every lane's scales lie in [2^-126, 2^-5) — where that product is exact, so the
// same bits: on unless RINGLM_CUDA_QUANT_MMA_SUBNORMAL_CODES=0 or
// set_quant_mma_subnormal_codes(false). H100, 8B mlx4: 8 % fewer instructions in the one-row
// gate/up launch, steps 1.02-1.03x at 512 x 1-8, 1.017x at 32k x 1 with bf16 K/V and 1.01x with
// k8v3 (docs/benchmarks.md, twenty-ninth session).
bool quant_mma_subnormal_codes();
void set_quant_mma_subnormal_codes(bool enabled);
// Calls quant_mma() has run in this process, and of them those with warp-private x pages (tests
// check which path a matmul took).
int64_t quant_mma_count();
int64_t quant_mma_warp_x_count();
int64_t quant_mma_wide_group_count();  // calls that ran 32-row groups
int64_t quant_mma_half_x_count();      // calls with bf16 x

}  // namespace ringlm::cuda
