// The op set models are written against. Each op checks shapes once and dispatches on the tensors'
// device to a backend (backends/cpu today, backends/cuda with the CUDA issue). Every op has a plain
// reference implementation in ops/reference.h that the tests compare with.
//
// Conventions: activations are F32 and row-major; weights keep the checkpoint's dtype
// (F32/BF16/F16) and Hugging Face layout (Linear weight is [out_features, in_features]).
// Bad arguments (shape, dtype, index out of range) throw ringlm::Error naming the op and argument;
// a CUDA tensor throws "CUDA backend not built" until the CUDA backend lands.
//
// Batch invariance (CPU): every op computes each output row with operations that depend only on
// that row's own inputs, never on how many rows are batched, how they are tiled or how threads
// split them. A row's result is bitwise the same alone, batched, or (attention) as part of a
// prefill chunk of any size. Results may differ between SIMD targets (AVX-512 vs AVX2).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ringlm::ops {

// y = x · wᵀ (+ bias). Empty `bias` (data == nullptr) means none. x and y may be row views
// (rows further apart than K / N); y must not overlap x or w. f32 accumulation.
void matmul(const Tensor& x,     // F32[M, K]
            const Tensor& w,     // F32|BF16|F16[N, K]
            const Tensor& bias,  // F32|BF16|F16[N] or empty
            Tensor& y);          // F32[M, N]

// out[m] = table[ids[m]] · scale (Gemma scales embeddings by sqrt(hidden)). Every id must be in
// [0, V).
void embedding(const Tensor& ids,          // I32[M]
               const Tensor& table,        // F32|BF16|F16[V, H]
               float scale, Tensor& out);  // F32[M, H]

struct RmsNormConfig {
  float eps = 1e-6f;
  bool unit_offset = false;  // Gemma: y = x̂ · (1 + w)
};
// As transformers, in f32: x̂ = x · 1/sqrt(mean(x²) + eps), then x̂ · w (or x̂ · (1 + w)).
// out may alias x. On CUDA out may be BF16/F16 when it feeds matmuls that take x in that dtype
// (matmul_input_dtype, ops/weight.h): the f32 result rounded once, disjoint from x.
void rms_norm(const Tensor& x,                            // F32[M, H]
              const Tensor& weight,                       // F32|BF16|F16[H]
              const RmsNormConfig& config, Tensor& out);  // F32[M, H] (or as above)

// x += residual, then out = rms_norm(x): the two ops at a pre-norm block boundary, bit for bit
// add_inplace then rms_norm, in one pass over each row. out may alias x or residual (or be
// 16-bit as rms_norm's, then disjoint from both).
void add_rms_norm(Tensor& x,                                  // F32[M, H]
                  const Tensor& residual,                     // F32[M, H]
                  const Tensor& weight,                       // F32|BF16|F16[H]
                  const RmsNormConfig& config, Tensor& out);  // F32[M, H] (or as rms_norm's)

// x += y, elementwise (y may be x itself).
void add_inplace(Tensor& x,         // F32[M, H]
                 const Tensor& y);  // F32[M, H]

// Rotary embedding tables, computed once per model from its config (see ops/rope_config.h).
struct RopeTable {
  std::vector<float> inv_freq;     // [rotary_dim / 2]
  float attention_scaling = 1.0f;  // YaRN / longrope multiply cos and sin by this
  int rotary_dim = 0;              // dims rotated (head_dim unless partial rotary)
};
// Rotates x in place, "rotate_half" (NeoX) layout as transformers' Llama: pairs
// (i, i + rotary_dim/2). The angle is pos · inv_freq[i] in f32; cos and sin are scaled by
// attention_scaling; dims from rotary_dim on are left untouched. Positions must be >= 0.
void rope(Tensor& x,                // F32[T, heads, head_dim]
          const Tensor& positions,  // I32[T]
          const RopeTable& table);

enum class Activation { SiLU, GeluTanh };
// out = act(gate) * up; out may alias gate. On CUDA out may be BF16/F16 as rms_norm's.
void gated_activation(const Tensor& gate,                   // F32[M, I]
                      const Tensor& up,                     // F32[M, I]
                      Activation activation, Tensor& out);  // F32[M, I] (or as rms_norm's)

// Row-wise softmax in place: exp(x - max) / sum. -inf entries give 0; a row of only -inf, or with
// any NaN, becomes all NaN (as torch).
void softmax(Tensor& x);  // F32[M, N]
// out[m] = argmax_n x[m, n]; the lowest index wins ties, and NaN counts as the maximum (the first
// NaN wins), both as torch.argmax. Rows must not be empty.
void argmax(const Tensor& x,  // F32[M, N]
            Tensor& out);     // I32[M]
// x = cap · tanh(x / cap), elementwise (Gemma 2 final-logit soft-capping); cap > 0.
void softcap(Tensor& x, float cap);  // F32[M, N]

// ---- Attention over paged K/V ----
//
// A layer's K/V live in fixed-size blocks of `block_tokens` tokens. A row's tokens 0..n-1 are found
// through its block table: token t is at block_table[row][t / block_tokens], offset t %
// block_tokens. The KV block layer (kv/) owns the blocks; these views are what kernels read.
//
// Storage format: dense (bits == 0) views hold the values in k and v. Affine views (bits 4 or 8,
// the MLX `affine` quantization, kv/affine_codec.h) hold per token and kv head the head_dim codes
// packed LSB-first into uint32 words in k / v, and one scale and bias per group of `group_size`
// values along head_dim in the scale/bias planes: value ≈ scale·code + bias.
// TurboQuant views (value_bits > 0, kv/turbo_codec.h) hold `bits`-bit key codes and
// `value_bits`-bit value codes as byte streams, f16 key scales and zero points (k_scales, k_biases:
// k ≈ (code + zero)·scale) and f16 value scales; values are stored rotated (attention un-rotates
// its output).
struct KvLayerView {
  Tensor k;  // dense: F32|BF16|F16[num_blocks, block_tokens, kv_heads, head_dim]
             // affine: U32[num_blocks, block_tokens, kv_heads, head_dim·bits/32]
             // turbo: U8[num_blocks, block_tokens, kv_heads, head_dim·bits/8]
  Tensor v;  // dense, affine: same shape and dtype as k
             // turbo: U8[num_blocks, block_tokens, kv_heads, head_dim·value_bits/8]
  // Affine only (empty when dense): BF16[num_blocks, block_tokens, kv_heads, head_dim/group_size]
  // Turbo: k_scales, k_biases (zero points), v_scales F16[.., head_dim/32]; v_biases empty.
  // (default member initializers: `KvLayerView{k, v}` stays a complete dense view)
  Tensor k_scales{}, k_biases{}, v_scales{}, v_biases{};
  int bits = 0;        // 0: dense; 4 or 8: affine codes; turbo: key bits (2, 4, 5, 8)
  int group_size = 0;  // affine: values per scale/bias group (32 or 64); turbo: 32
  int value_bits = 0;  // turbo only: value bits (2, 3, 4, 5, 8)
  bool dense() const { return bits == 0; }
  bool affine() const { return bits > 0 && value_bits == 0; }
  bool turbo() const { return value_bits > 0; }
  int block_tokens() const { return static_cast<int>(k.shape[1]); }
  int kv_heads() const { return static_cast<int>(k.shape[2]); }
  int head_dim() const {
    if (turbo()) return static_cast<int>(k.shape[3] * 8 / bits);
    return static_cast<int>(affine() ? k.shape[3] * 32 / bits : k.shape[3]);
  }
};

// Per-step row layout, shared by every layer of a step.
struct AttentionRows {
  int num_rows = 0;
  // [num_rows + 1]: row r's queries are q[query_start[r]..query_start[r+1])
  const int32_t* query_start = nullptr;
  // [num_rows]: tokens in the row's KV after this step's writes
  const int32_t* context_len = nullptr;
  const int32_t* block_table = nullptr;  // [num_rows, max_blocks]
  int max_blocks = 0;
  // Set by kv::StepPlan, which checks its tables against the pools once per step: attention then
  // skips the per-block check on every layer.
  bool tables_checked = false;
  // Backend copy of these tables, uploaded once per step (cuda::DeviceRows for CUDA tensors);
  // null: a CUDA attention call uploads the host tables itself.
  const void* device_mirror = nullptr;
  // Only the queries at positions in [query_pos_begin, query_pos_end) are computed; the other
  // rows of `out` are left as they are. A transitioning KV group (--kv-quant-start S) runs
  // attention twice per layer: positions < S over its bf16 view, positions >= S over its
  // quantized view.
  int32_t query_pos_begin = 0;
  int32_t query_pos_end = INT32_MAX;
  bool all_queries() const { return query_pos_begin <= 0 && query_pos_end == INT32_MAX; }
};
// The checks attention applies to `rows` (query ranges cover [0, T), contexts hold their queries,
// block ids in [0, num_blocks)); throws ringlm::Error naming the row.
void check_attention_rows(const AttentionRows& rows, int64_t T, int64_t num_blocks,
                          int block_tokens);
// Query i of row r (n queries) sits at position context_len[r] - n + i and attends causally to
// keys at positions <= its own, and within `window` of it when window > 0. With sink_tokens = s
// as well (attention sinks, mlx-lm RotatingKVCache `keep`), the query at p sees the keys
// [0, min(s, p + 1)) ∪ [p - window + 1, p]: the first s tokens stay visible forever.
// Kernels read only the keys a query sees, so blocks wholly outside every query's visible keys
// may be the null block (the KV layer releases them).
struct AttentionParams {
  float scale = 1.0f;    // usually 1/sqrt(head_dim); Gemma uses query_pre_attn_scalar
  float softcap = 0.0f;  // > 0: scores = softcap · tanh(scores / softcap) (Gemma 2)
  int window = 0;        // > 0: sliding window of this many keys including the query's own
  int sink_tokens = 0;   // with window > 0: the first sink_tokens keys are always visible
};
// GQA: q head h reads kv head h / (q_heads / kv_heads). Online (flash-style) softmax in f32; an
// affine view is dequantized key row by key row inside the kernel; a turbo view decodes keys and
// rotated values per key row, accumulates the rotated values and un-rotates each output row once
// (equal to attending over un-rotated values up to f32 rounding). Checks that query_start covers
// [0, T) in order, context_len[r] >= the row's queries, and the blocks a row's context needs are
// valid block ids. Rows with no queries are skipped, as are queries outside
// [rows.query_pos_begin, rows.query_pos_end). out may alias q. On CUDA out may be BF16/F16 (then
// disjoint from q, every query computed): the f32 output rounded, as the o projection's cuBLAS
// matmul takes it.
void attention(const Tensor& q,  // F32[T, q_heads, head_dim]
               const KvLayerView& kv, const AttentionRows& rows, const AttentionParams& params,
               Tensor& out);  // F32[T, q_heads, head_dim] (CUDA: or BF16|F16)

// Writes this step's K/V: token t goes to slot slots[t] = block * block_tokens + offset, which must
// be in [0, num_blocks * block_tokens) and distinct. f32 is rounded to the cache dtype (nearest
// even); an affine view quantizes each (token, kv head) row as mx.quantize (float32, ties to even,
// true group max) and rounds scale and bias to bf16; a turbo view encodes each row as
// kv/turbo_codec.h.
void kv_write(const Tensor& k,      // F32[T, kv_heads, head_dim]
              const Tensor& v,      // F32[T, kv_heads, head_dim]
              const Tensor& slots,  // I32[T]
              KvLayerView& kv);

// One step's attention inputs, in place: per-head RMS norm of q and k (models with q_norm /
// k_norm), rope on both, then k and v written to their cache slots. Exactly rms_norm, rope and
// kv_write in that order — one op so a backend can do it in one pass (CUDA: one kernel, plus the
// quantizing write for affine and TurboQuant caches). The rotated q and k stay in q and k.
struct AttentionInputs {
  Tensor q;          // F32[T, heads, head_dim]
  Tensor k, v;       // F32[T, kv_heads, head_dim]; both empty: the layer writes no K/V
  Tensor positions;  // I32[T]
  Tensor slots;      // I32[T], as kv_write's (unused without k)
};
struct QkTransform {
  const Tensor* q_norm = nullptr;  // F32|BF16|F16[head_dim]; null or empty: no norm
  const Tensor* k_norm = nullptr;
  RmsNormConfig norm;
  const RopeTable* rope = nullptr;  // required
};
void prepare_attention(AttentionInputs& in, const QkTransform& transform,
                       KvLayerView* kv);  // null exactly when k is empty

}  // namespace ringlm::ops
