// The decode GEMV behind cuda::matmul for small M and BF16/F16 weights (gemv.cu). Internal to
// backends/cuda; plain C++.
//
// Why M <= 8: at M rows each 16-byte weight load (8 values) feeds 8·M FMAs. The H200 issues about
// 132 SMs × 128 lanes × 1.98 GHz ≈ 33 T thread-instructions/s against 4.8 TB/s of HBM, i.e. ~7
// instructions per weight byte; the GEMV spends about (M + 1) / 2 + x rounding per byte, so M = 8
// (~5) still streams at bandwidth and M = 16 (~9) would be issue-bound — there cuBLAS's tensor
// cores win. Bytes in flight: a block's 256 threads each have 4 columns × 2 chunks × 16 B = 128 B
// of weights outstanding; two such blocks per SM are 64 KB, above the ~25 KB per SM that
// 4.8 TB/s × ~700 ns of latency asks for.
//
// Precision: as cuda_ops.h's matmul contract (x rounded to the weights' dtype, exact products, f32
// accumulation) in an order fixed by K alone: thread t of the block sums chunks of 8 values
// t, t + 256, ... in order (one FMA chain per output), then the block reduces the 256 partial
// sums in a fixed tree, then + bias. So row m of y depends only on x[m], never on M or the other
// rows (batch invariance) — but it differs in the last bits from what cuBLAS gives for the same
// row when M > 8.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ringlm::cuda {

constexpr int64_t kGemvMaxRows = 8;

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

}  // namespace ringlm::cuda
