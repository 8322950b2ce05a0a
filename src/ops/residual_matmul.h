// The matmuls at a pre-norm block boundary with the residual stream's add and norm folded in: the
// projection that ends a block adds into the stream (matmul_accumulate), and the matmuls that
// start the next block read the stream through its norm (NormedRows). Each op is bit for bit the
// unfused ops it names, which is what runs unless the backend fuses it — CUDA: the decode GEMV
// (1-2 rows of dense 16-bit weights), where a layer then runs no norm kernel at all. (The same
// fusion in the MLX quantized GEMM was measured and lost: docs/benchmarks.md.)
//
// A model takes these forms only where residual_fusion_applies(): elsewhere add_rms_norm (one
// kernel for the add and the norm) is cheaper than the forms' unfused fallbacks (a separate add).
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::ops {

// Matmul input rows rms_norm(*x, *weight, config): x is the residual stream.
struct NormedRows {
  const Tensor* x;       // F32[M, K]
  const Tensor* weight;  // F32|BF16|F16[K]
  RmsNormConfig config;
};

// rms_norm(in) into `normed`, then matmul_many(normed, targets). Fused: normed is not written.
void matmul_many(const NormedRows& in,
                 Tensor& normed,  // F32[M, K] (or the targets' matmul_input_dtype: rounded once)
                 std::span<const MatmulTarget> targets);

// rms_norm(in) into `normed`, then gated_matmul(normed, gate, up, activation, out). Fused: normed,
// gate.y and up.y are not written.
void gated_matmul(const NormedRows& in,
                  Tensor& normed,  // F32[M, K]
                  const MatmulTarget& gate, const MatmulTarget& up, Activation activation,
                  Tensor& out);  // F32[M, N]

// A block's q/k/v projections and prepare_attention after them: matmul_many(in, normed, qkv)
// then prepare_attention(inputs, transform, kv), where qkv is [q, k, v] (q alone for a layer
// that writes no K/V) and inputs.q / k / v are their outputs viewed as [T, heads, head_dim].
// Fused (CUDA: the normalizing decode GEMV, no q/k norms, full rotary, a dense cache): rope and
// the K/V write run in the GEMV's store (cuda::GemvRope) — no prepare_attention kernel; normed is
// not written.
void matmul_prepare_attention(const NormedRows& in,
                              Tensor& normed,  // F32[M, K]
                              std::span<const MatmulTarget> qkv, AttentionInputs& inputs,
                              const QkTransform& transform,
                              KvLayerView* kv);  // null exactly when qkv is q alone

// The same for a block input already normalized: matmul_many(x, qkv) then prepare_attention.
// Fused (CUDA, 3-64 rows, adjacent 16-bit q/k/v weights: cuda::matmul_prepare_attention):
// prepare_attention's kernel reads the projections' joined GEMM output, no column split.
void matmul_prepare_attention(const Tensor& x,  // F32[M, K] (or the weights' input dtype)
                              std::span<const MatmulTarget> qkv, AttentionInputs& inputs,
                              const QkTransform& transform,
                              KvLayerView* kv);  // null exactly when qkv is q alone

// acc += x · wᵀ (+ bias): matmul(x, w, bias, scratch) then add_inplace(acc, scratch). Fused:
// scratch is not written.
void matmul_accumulate(const Tensor& x,     // F32[M, K]
                       const Weight& w,     // [N, K]
                       const Tensor& bias,  // F32|BF16|F16[N] or empty
                       Tensor& scratch,     // F32[M, N]
                       Tensor& acc);        // F32[M, N], disjoint from x

// Whether the backend fuses all three for these rows, this norm and these weights (a layer's
// projections): CUDA with the RINGLM_CUDA_FUSED_NORMS switch on, dense weights of one 16-bit
// dtype that the GEMV serves (at most 2 rows), and the norm weight in that dtype.
bool residual_fusion_applies(const NormedRows& in, std::span<const Weight* const> weights);

}  // namespace ringlm::ops
