// The small-M GEMM behind cuda::matmul for 3..16 rows of BF16/F16 weights (small_gemm.cu), on
// tensor cores. Internal to backends/cuda; plain C++.
//
// Why: cuBLAS's tile shapes for M = 3..16 read the weights at about half of the H200's bandwidth
// (a batch-8 decode step of the 8B shape takes 7.2 ms against 3.8 ms of weight bytes), and the
// CUDA-core GEMV (gemv.h) turns issue-bound above 2 rows. One m16n8k16 MMA covers every row of x
// for 8 columns × 16 values of k, so the kernel spends ~1 instruction per weight byte whatever M.
//
// Precision: as cuda_ops.h's matmul contract (x rounded to the weights' dtype, f32 accumulation).
// The reduction order is fixed by (N, K) alone: the K split per column block (small_gemm_splits),
// each split's MMA chain in k order, then the splits summed in order and + bias. Row m of y
// depends only on x[m]: bitwise the same for any M in 3..16 (not the same bits as the GEMV at
// M <= 2 or cuBLAS above 16).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ringlm::cuda {

constexpr int64_t kSmallGemmMinRows = 3, kSmallGemmMaxRows = 16;

// True when small_gemm() handles this matmul: M in [3, 16], w BF16/F16 with K % 32 == 0 and
// 16-byte-aligned rows.
bool small_gemm_applies(const Tensor& x,   // F32[M, K]
                        const Tensor& w);  // [N, K]

// y = x · wᵀ (+ bias), as cuda::matmul, for small_gemm_applies() shapes.
void small_gemm(const Tensor& x,     // F32[M, K], rows may be strided
                const Tensor& w,     // BF16|F16[N, K] contiguous
                const Tensor& bias,  // F32|BF16|F16[N] or empty
                Tensor& y);          // F32[M, N], rows may be strided

}  // namespace ringlm::cuda
