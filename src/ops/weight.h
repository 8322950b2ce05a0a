// Weight: a Linear / Embedding matrix [N, K] that is either dense (the checkpoint's float tensor)
// or MLX affine-quantized (mlx-community checkpoints: codes + per-group scales and biases, see
// kv/affine_codec.h for the codec). Quantized along K, the input dim: element (n, k) of the
// matrix is scales[n, k/g]·q(n, k) + biases[n, k/g] in f32, with q(n, k) code k of row n's packed
// LSB-first bit stream. An embedding table [V, H] is quantized along H, so a tied LM head is the
// same Weight used as a matmul weight.
//
// The ops here extend ops/ops.h's matmul and embedding to both kinds. On quantized weights they
// never dequantize whole tensors: matmul dequantizes one group of NR weight rows at a time into
// registers, embedding just the looked-up rows. Batch invariance as ops/ops.h; besides, a
// quantized matmul gives bit for bit what the dense matmul gives on the f32 matrix
// dequant(codes) (same per-lane accumulation order, the dequantization rounded as written above).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"
#include "ops/ops.h"

namespace ringlm::ops {

struct QuantizedMatrix {
  Tensor codes;        // U32[N, K*bits/32]
  Tensor scales;       // F32|BF16|F16[N, K/group_size]
  Tensor biases;       // same dtype and shape as scales
  int bits = 0;        // 2, 3, 4, 5, 6 or 8
  int group_size = 0;  // 32, 64 or 128

  int64_t rows() const { return codes.shape[0]; }
  int64_t cols() const { return bits == 0 ? 0 : codes.shape[1] * 32 / bits; }
};

class Weight {
 public:
  Weight() = default;
  // Implicit on purpose: a dense tensor is a Weight wherever one is expected.
  Weight(const Tensor& dense) : dense_(dense) {}  // NOLINT(google-explicit-constructor)
  static Weight quantized(const QuantizedMatrix& q);

  bool is_quantized() const { return quant_.bits != 0; }
  bool empty() const { return dense_.empty() && !is_quantized(); }
  const Tensor& dense() const;           // throws unless dense
  const QuantizedMatrix& quant() const;  // throws unless quantized
  int64_t rows() const { return is_quantized() ? quant_.rows() : dense_.shape[0]; }
  int64_t cols() const { return is_quantized() ? quant_.cols() : dense_.shape[1]; }
  // The dtype of the dense tensor, or of a quantized matrix's scales (the checkpoint's dtype).
  DType float_dtype() const { return is_quantized() ? quant_.scales.dtype : dense_.dtype; }
  Device device() const { return is_quantized() ? quant_.codes.device : dense_.device; }
  std::string describe() const;  // "BF16[4096, 128]" or "affine 4-bit g64 [4096, 128] (BF16)"

 private:
  Tensor dense_;
  QuantizedMatrix quant_;
};

// Checks a quantized matrix's layout: codes U32 [N, K*bits/32] contiguous, scales and biases of
// one float dtype [N, K/group_size] contiguous, bits and group size supported. `what` names it in
// the error.
void check_quantized(const QuantizedMatrix& q, const char* what);

// The dtype in which a matmul of `rows` rows with w takes x at no cost in precision: BF16/F16
// where the backend rounds x to the weights' 16-bit dtype anyway (CUDA above the decode GEMV's
// rows: cuBLAS; MLX-quantized weights with BF16 scales from 9 rows: the tensor-core kernel and
// the dequantized tiles, cuda::quantized_matmul_takes_half_x), so the op that makes x (rms_norm,
// gated_activation) can write it rounded and the matmul skips its own rounding — bit for bit the
// F32 path. F32 everywhere else.
DType matmul_input_dtype(const Weight& w, int64_t rows);

// y = x · wᵀ (+ bias), as ops::matmul, for a dense or quantized w.
void matmul(const Tensor& x,     // F32[M, K] (or matmul_input_dtype)
            const Weight& w,     // [N, K]
            const Tensor& bias,  // F32|BF16|F16[N] or empty
            Tensor& y);          // F32[M, N]

// One input, several weights: y_i = x · w_iᵀ (+ bias_i), each exactly as matmul(x, w_i, bias_i,
// y_i) — bit for bit — so that a backend can run them as one launch (CUDA: the decode GEMV over
// up to three 16-bit weights, e.g. the q, k and v projections). The one exception: CUDA above
// the GEMV's rows with weights placed back to back (WeightStore::place_together) runs one cuBLAS
// GEMM over them, within f32 rounding of the separate matmuls (cuBLAS is not bitwise across
// shapes anyway). bias may point to an empty tensor.
struct MatmulTarget {
  const Weight* w;     // [N_i, K]
  const Tensor* bias;  // F32|BF16|F16[N_i] or empty
  Tensor* y;           // F32[M, N_i]
};
void matmul_many(const Tensor& x,  // F32[M, K] (or matmul_input_dtype of the weights)
                 std::span<const MatmulTarget> targets);

// An MLP's gated projection: out = act(x · gateᵀ + gate bias) ⊙ (x · upᵀ + up bias), bit for bit
// matmul_many({gate, up}) then gated_activation(*gate.y, *up.y, activation, out) — what runs
// unless a backend fuses it (CUDA: the decode GEMV's epilogue for M <= 2; one GEMM over adjacent
// gate and up weights up to 64 rows, as matmul_many's exception; both leave gate.y and up.y
// unwritten). out may be *gate.y.
void gated_matmul(const Tensor& x,  // F32[M, K] (or matmul_input_dtype of the weights)
                  const MatmulTarget& gate, const MatmulTarget& up, Activation activation,
                  Tensor& out);  // F32[M, N] (or matmul_input_dtype of the down projection)

namespace detail {
// A fused gated_matmul's checks of out (gated_activation's against gate's output, which a fused
// launch never writes): dtype `dtype`, gate_y's shape, rows, disjoint from x; a known activation.
void check_gated_out(const Tensor& x,       // [M, K]
                     const Tensor& gate_y,  // F32[M, N]
                     Activation activation, DType dtype, const Tensor& out);
}  // namespace detail

// out[m] = table[ids[m]] · scale, as ops::embedding, for a dense or quantized table: a quantized
// row dequantizes to f32 (rounded as above), then is multiplied by scale.
void embedding(const Tensor& ids,          // I32[M]
               const Weight& table,        // [V, H]
               float scale, Tensor& out);  // F32[M, H]

}  // namespace ringlm::ops
