// Plain scalar reference implementations of every op in ops/ops.h, for tests to compare with.
// Straightforward loops, double accumulation, no SIMD, no threads, no paging tricks: attention
// gathers the K/V each row's queries see into a dense copy and builds an explicit
// causal/window/sink mask. Same signatures and conventions as ops/ops.h (CPU tensors only; no
// argument checks).
#pragma once

#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::ops::reference {

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);
void embedding(const Tensor& ids, const Tensor& table, float scale, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& weight, const RmsNormConfig& config, Tensor& out);
void add_inplace(Tensor& x, const Tensor& y);
void rope(Tensor& x, const Tensor& positions, const RopeTable& table);
void gated_activation(const Tensor& gate, const Tensor& up, Activation activation, Tensor& out);
void softmax(Tensor& x);
void argmax(const Tensor& x, Tensor& out);
void softcap(Tensor& x, float cap);
void attention(const Tensor& q, const KvLayerView& kv, const AttentionRows& rows,
               const AttentionParams& params, Tensor& out);
void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, KvLayerView& kv);

// MLX affine-quantized weights: each element dequantized on its own as f32 scale·q + bias (the
// product rounded, then the sum), then as matmul / embedding above.
void matmul_quantized(const Tensor& x, const QuantizedMatrix& w, const Tensor& bias, Tensor& y);
void embedding_quantized(const Tensor& ids, const QuantizedMatrix& table, float scale, Tensor& out);
// Element (n, k) of dequant(w).
float dequantized_at(const QuantizedMatrix& w, int64_t n, int64_t k);

// Element i of a float tensor's storage (F32/BF16/F16), widened to f32.
float load_f32(const Tensor& t, int64_t i);

}  // namespace ringlm::ops::reference
