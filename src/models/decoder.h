// Building blocks shared by the decoder-only families: weight loading with shape checks, the
// per-step activation buffers, the attention block (projections, q/k norm, rope, KV write, paged
// attention, output projection), the gated MLP and the LM head over the wanted tokens.
#pragma once

#include <initializer_list>
#include <string>

#include "core/arena.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/layout.h"
#include "kv/paged_kv_cache.h"
#include "kv/step_plan.h"
#include "ops/ops.h"
#include "ops/weight.h"

namespace ringlm::models {

struct DecoderDims {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate = 0;
  int64_t vocab = 0;
};

// The shape of a decoder from its config; checks that query heads group evenly over KV heads.
DecoderDims decoder_dims(const io::ModelConfig& config);

// One KV spec per layer: the model's KV shape with each layer's window (0 = full attention).
std::vector<kv::LayerKvSpec> kv_specs(const DecoderDims& dims, const std::vector<int>& windows);

// Looks tensors up by name and checks their shapes; errors name the tensor and checkpoint.
// `quantization` is config.json's: a non-affine mode (mxfp4, a transformers quant_method) is
// refused here, by name.
class WeightLoader {
 public:
  explicit WeightLoader(const io::WeightStore& store, io::QuantizationConfig quantization = {});
  Tensor required(const std::string& name, std::initializer_list<int64_t> dims) const;
  Tensor optional(const std::string& name, std::initializer_list<int64_t> dims) const;
  // A Linear / Embedding matrix `module`.weight of shape [rows, cols]: MLX affine-quantized when
  // the checkpoint has `module`.scales (as mlx-lm decides), with the bits and group size of the
  // config's per-module override or its defaults; else the dense tensor.
  ops::Weight matrix(const std::string& module, int64_t rows, int64_t cols) const;
  // Asks the store to upload these dense matrices back to back (WeightStore::place_together), so
  // that a GPU runs them as one GEMM; call before matrix() on any of them. Quantized modules and
  // the CPU: nothing.
  void place_together(std::initializer_list<std::string> modules) const;
  bool has(const std::string& name) const { return store_.has(name); }
  const std::string& dir() const { return store_.dir(); }

 private:
  const io::WeightStore& store_;
  io::QuantizationConfig quantization_;
};

// Token embedding, final norm and LM head. An absent head means tied embeddings, which the config
// must allow (tie_word_embeddings).
struct EmbeddingAndHead {
  ops::Weight embed;    // [V, H]
  Tensor final_norm;    // [H]
  ops::Weight lm_head;  // [V, H] (== embed when tied)
};
// model_prefix: "model." (or a multimodal checkpoint's text-tower prefix); lm_head_name: the full
// name of an untied head.
EmbeddingAndHead load_embedding_and_head(const WeightLoader& loader,
                                         const std::string& model_prefix,
                                         const std::string& lm_head_name,
                                         const io::ModelConfig& config);

struct AttentionWeights {
  ops::Weight q, k, v, o;                 // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
  Tensor q_bias, k_bias, v_bias, o_bias;  // empty unless present
  Tensor q_norm, k_norm;                  // [D] per-head RMSNorm weights, or empty
};
struct MlpWeights {
  ops::Weight gate, up, down;  // [I, H], [I, H], [H, I]
  Tensor gate_bias, up_bias, down_bias;
};

// prefix: "model.layers.N." (the block's own names follow HF: self_attn.q_proj.weight, ...).
AttentionWeights load_attention(const WeightLoader& loader, const std::string& prefix,
                                const DecoderDims& dims);
MlpWeights load_mlp(const WeightLoader& loader, const std::string& prefix, const DecoderDims& dims);

// Activation buffers of one step, carved from the arena. With a 16-bit `half` dtype (the
// matmuls' input dtype at this step's rows: ops::matmul_input_dtype) also h_half, act_half and
// attn_half, where norms, the gated activation and decode attention write matmul inputs already
// rounded (matmul_feed).
struct StepBuffers {
  Tensor x, h;       // F32[T, H]: residual stream and block input/output
  Tensor q, attn;    // F32[T, Hq*D]
  Tensor k, v;       // F32[T, Hkv*D]
  Tensor gate, up;   // F32[T, I]
  Tensor h_half;     // half[T, H] or empty
  Tensor act_half;   // half[T, I] or empty
  Tensor attn_half;  // half[T, Hq*D] or empty
  static StepBuffers alloc(Arena& arena, int64_t tokens, const DecoderDims& dims,
                           DType half = DType::F32);
  static size_t bytes(int64_t max_tokens, int64_t max_logits, const DecoderDims& dims);
};

// The buffer an op writes a matmul input into: `half` when every one of `weights` takes x in
// half's dtype at this many rows (ops::matmul_input_dtype), else `f32` ([T, N] both).
Tensor& matmul_feed(Tensor& f32, Tensor& half, std::initializer_list<const ops::Weight*> weights);
// Where the norm before a block writes the block's input: b.h or b.h_half (matmul_feed over
// q/k/v, or over gate/up).
Tensor& attention_input(StepBuffers& b, const AttentionWeights& w);
Tensor& mlp_input(StepBuffers& b, const MlpWeights& w);

struct AttentionBlockConfig {
  const ops::RopeTable* rope = nullptr;
  ops::AttentionParams attention;
  ops::RmsNormConfig qk_norm;  // used when the weights have q/k norms
};

// How a block meets the residual stream. plain(in, out): the block reads `in` (the stream
// already normalized) and writes its output to `out`. fused(stream, norm): its first matmuls
// read the stream through the norm and its last adds into the stream (ops/residual_matmul.h) —
// for a pre-norm model where ops::residual_fusion_applies, so that the residual add and the norm
// run inside the matmuls; bit for bit plain() with add_rms_norm between the blocks.
struct BlockIo {
  const Tensor* in = nullptr;    // plain: F32[T, H] (or the matmuls' 16-bit input dtype)
  Tensor* out = nullptr;         // plain: F32[T, H]
  Tensor* stream = nullptr;      // fused: F32[T, H], read through the norm and added into
  const Tensor* norm = nullptr;  // fused: [H]
  ops::RmsNormConfig norm_config;

  static BlockIo plain(const Tensor& in, Tensor& out) { return {&in, &out, nullptr, nullptr, {}}; }
  static BlockIo fused(Tensor& stream, const Tensor& norm, const ops::RmsNormConfig& config) {
    return {nullptr, nullptr, &stream, &norm, config};
  }
};

// o_proj(attention(rope(norm(q)), rope(norm(k)), v)) into io; writes the layer's K/V for the
// step (unless the layer reads a donor's). Window and sinks come from the plan (the layer's KV
// group); config.attention supplies scale and soft-capping.
void attention_block(const AttentionWeights& w, const AttentionBlockConfig& config, int layer,
                     const kv::StepPlan& plan, kv::PagedKvCache& cache, StepBuffers& buffers,
                     const BlockIo& io);
// down(act(gate(in)) * up(in)) into io.
void mlp_block(const MlpWeights& w, ops::Activation activation, StepBuffers& buffers,
               const BlockIo& io);

struct LmHeadConfig {
  ops::RmsNormConfig norm;
  float final_softcap = 0.0f;  // > 0: logits = cap · tanh(logits / cap)
};
// Final norm and LM head on the tokens whose logits the plan wants.
void lm_head(const Tensor& x,           // F32[T, H]
             const Tensor& final_norm,  // [H]
             const ops::Weight& head,   // [V, H]
             const LmHeadConfig& config, const kv::StepPlan& plan, Arena& arena,
             Tensor& logits);  // F32[wanted, V]

ops::Activation activation_from_name(const std::string& name, const std::string& model_type);

}  // namespace ringlm::models
