// The decode GEMV behind cuda::matmul for small M and BF16/F16 weights (gemv.cu). Internal to
// backends/cuda; plain C++.
//
// Why M <= 2: measured on the H200 (docs/benchmarks.md, Llama-3.1-8B shape), the GEMV makes a
// batch-1 decode step 12 % faster than cuBLAS but a batch-8 step 1.6× slower: each 16-byte weight
// load feeds 8·M FMAs plus M·8 reads and roundings of x, so the kernel turns issue-bound as M
// grows (about 0.8 ms more per step and row over the 8B model's 16 GB), while cuBLAS stays flat.
// The two cross near M = 2. A tensor-core small-M kernel is what would serve M = 3..16 (a first
// one, wip/skinny-gemm.patch, still loses to cuBLAS: docs/benchmarks.md).
// Precision: as cuda_ops.h's matmul contract (x rounded to the weights' dtype, exact products, f32
// accumulation) in an order fixed by K alone: thread t of the block sums chunks of 8 values
// t, t + 256, ... in order (one FMA chain per output), then the block reduces the 256 partial
// sums in a fixed tree, then + bias. So row m of y depends only on x[m], never on M or the other
// rows (batch invariance) — but it differs in the last bits from what cuBLAS gives for the same
// row when M > kGemvMaxRows.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ringlm::cuda {

constexpr int64_t kGemvMaxRows = 2;

// True when gemv() handles this matmul: 1 <= M <= kGemvMaxRows, w BF16/F16 with K % 8 == 0 and
// 16-byte-aligned rows.
bool gemv_applies(const Tensor& x,   // F32[M, K]
                  const Tensor& w);  // [N, K]

// y = x · wᵀ (+ bias), as cuda::matmul, for gemv_applies() shapes.
void gemv(const Tensor& x,     // F32[M, K], rows may be strided
          const Tensor& w,     // BF16|F16[N, K] contiguous
          const Tensor& bias,  // F32|BF16|F16[N] or empty
          Tensor& y);          // F32[M, N], rows may be strided

// Leading dimension of a row-major matrix view: its row stride (any value >= cols when rows <= 1).
int64_t leading_dim(const Tensor& t);

// Whether two-row GEMV launches are persistent (at most 2 blocks per SM walking the column tiles,
// each block loading its next tile's first weights while it reduces the current one) rather than
// one block per tile, as one-row launches always are: true unless RINGLM_CUDA_GEMV_PERSISTENT=0 or
// set_gemv_persistent(false) (tests, same-binary A/Bs; CUDA graphs captured before keep theirs).
// The same bits either way.
bool gemv_persistent();
void set_gemv_persistent(bool enabled);

}  // namespace ringlm::cuda
