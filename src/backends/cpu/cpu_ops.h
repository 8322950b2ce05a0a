// The CPU backend: one entry point per op. Callers (ops/*.cc) have checked shapes, dtypes and
// devices already; these functions trust their arguments. SIMD through Highway with runtime
// dispatch, threads through ThreadPool::global().
//
// Batch invariance: every kernel computes each output element with a sequence of operations that
// depends only on that element's own inputs (its row of x, its keys), never on the batch size,
// the tile it lands in or the thread split. A row's result is bitwise the same alone or batched.
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::cpu {

void matmul(const Tensor& x,     // F32[M, K], rows may be strided
            const Tensor& w,     // F32|BF16|F16[N, K] contiguous
            const Tensor& bias,  // F32|BF16|F16[N] or empty
            Tensor& y);          // F32[M, N], rows may be strided

void embedding(const Tensor& ids,          // I32[M], each in [0, V)
               const Tensor& table,        // F32|BF16|F16[V, H]
               float scale, Tensor& out);  // F32[M, H]

// MLX affine-quantized weights (ops/weight.h): w is checked, K = w.cols().
void matmul_quantized(const Tensor& x,                       // F32[M, K], rows may be strided
                      const ops::QuantizedMatrix& w,         // [N, K]
                      const Tensor& bias,                    // F32|BF16|F16[N] or empty
                      Tensor& y);                            // F32[M, N], rows may be strided
void embedding_quantized(const Tensor& ids,                  // I32[M], each in [0, V)
                         const ops::QuantizedMatrix& table,  // [V, H]
                         float scale, Tensor& out);          // F32[M, H]

void rms_norm(const Tensor& x,                                 // F32[M, H]
              const Tensor& weight,                            // F32|BF16|F16[H]
              const ops::RmsNormConfig& config, Tensor& out);  // F32[M, H]

void add_rms_norm(Tensor& x,                                       // F32[M, H]
                  const Tensor& residual,                          // F32[M, H]
                  const Tensor& weight,                            // F32|BF16|F16[H]
                  const ops::RmsNormConfig& config, Tensor& out);  // F32[M, H]
void add_inplace(Tensor& x,                                        // F32[M, H]
                 const Tensor& y);                                 // F32[M, H]

void rope(Tensor& x,                // F32[T, heads, head_dim] contiguous
          const Tensor& positions,  // I32[T], each >= 0
          const ops::RopeTable& table);

void gated_activation(const Tensor& gate,                        // F32[M, I]
                      const Tensor& up,                          // F32[M, I]
                      ops::Activation activation, Tensor& out);  // F32[M, I]

void softmax(Tensor& x);                    // F32[M, N]
void argmax(const Tensor& x, Tensor& out);  // F32[M, N] -> I32[M]
void softcap(Tensor& x, float cap);         // F32[M, N]

// The sampler's weights (engine/sampler.cc): w[i] = exp(x[i] / t − top) in f64 (≤ 1 ulp), 0 where
// that is not finite. t > 0; w has x's size.
void sampling_weights(std::span<const float> x, double t, double top, std::span<double> w);

void attention(const Tensor& q,  // F32[T, q_heads, head_dim] contiguous
               const ops::KvLayerView& kv, const ops::AttentionRows& rows,
               const ops::AttentionParams& params,
               Tensor& out);  // F32[T, q_heads, head_dim] contiguous (may alias q)

void kv_write(const Tensor& k,      // F32[T, kv_heads, head_dim]
              const Tensor& v,      // F32[T, kv_heads, head_dim]
              const Tensor& slots,  // I32[T], each in [0, num_blocks * block_tokens)
              ops::KvLayerView& kv);

}  // namespace ringlm::cpu
