#include "models/decoder.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "kv/affine_codec.h"
#include "ops/residual_matmul.h"

namespace ringlm::models {

DecoderDims decoder_dims(const io::ModelConfig& c) {
  const DecoderDims dims{c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
                         c.head_dim,    c.intermediate_size,   c.vocab_size};
  RINGLM_USER_CHECK(dims.kv_heads > 0 && dims.heads % dims.kv_heads == 0, "num_attention_heads ",
                    dims.heads, " is not a multiple of num_key_value_heads ", dims.kv_heads);
  return dims;
}

std::vector<kv::LayerKvSpec> kv_specs(const DecoderDims& dims, const std::vector<int>& windows) {
  std::vector<kv::LayerKvSpec> specs;
  for (int window : windows) {
    kv::LayerKvSpec s;
    s.kv_heads = static_cast<int>(dims.kv_heads);
    s.head_dim = static_cast<int>(dims.head_dim);
    s.window = window;
    specs.push_back(s);
  }
  return specs;
}

EmbeddingAndHead load_embedding_and_head(const WeightLoader& loader,
                                         const std::string& model_prefix,
                                         const std::string& lm_head_name,
                                         const io::ModelConfig& c) {
  EmbeddingAndHead out;
  out.embed = loader.matrix(model_prefix + "embed_tokens", c.vocab_size, c.hidden_size);
  out.final_norm = loader.required(model_prefix + "norm.weight", {c.hidden_size});
  if (loader.has(lm_head_name)) {
    const std::string module = lm_head_name.substr(0, lm_head_name.size() - 7);  // - ".weight"
    out.lm_head = loader.matrix(module, c.vocab_size, c.hidden_size);
  } else {
    RINGLM_USER_CHECK(c.tie_word_embeddings, loader.dir(), ": missing tensor ", lm_head_name,
                      " (and tie_word_embeddings is false)");
    out.lm_head = out.embed;
  }
  return out;
}

WeightLoader::WeightLoader(const io::WeightStore& store, io::QuantizationConfig quantization)
    : store_(store), quantization_(std::move(quantization)) {
  const std::string& mode = quantization_.mode;
  RINGLM_USER_CHECK(mode.empty() || mode == "affine", store_.dir(), "/config.json: quantization '",
                    mode, "' is not supported (ringlm reads MLX affine-quantized checkpoints)");
}

ops::Weight WeightLoader::matrix(const std::string& module, int64_t rows, int64_t cols) const {
  const std::string weight = module + ".weight";
  if (!store_.has(module + ".scales")) return required(weight, {rows, cols});
  // mlx-lm quantizes a module when its scales are in the checkpoint; the config says how.
  const std::string where = store_.dir() + ": " + module;
  RINGLM_USER_CHECK(quantization_.group_size != 0, where,
                    " is quantized (has .scales) but config.json has no MLX quantization");
  int group = quantization_.group_size, bits = quantization_.bits;
  if (const auto it = quantization_.overrides.find(module); it != quantization_.overrides.end())
    std::tie(group, bits) = it->second;
  RINGLM_USER_CHECK(group != 0, where,
                    " has .scales but config.json's quantization marks it not quantized");
  kv::validate_affine_format({bits, group});  // clear message for unsupported bits / groups
  RINGLM_USER_CHECK(cols % group == 0, where, ": input size ", cols,
                    " is not a multiple of group_size ", group);
  ops::QuantizedMatrix q;
  q.bits = bits;
  q.group_size = group;
  q.codes = store_.get(weight);
  q.scales = store_.get(module + ".scales");
  q.biases = store_.get(module + ".biases");
  RINGLM_USER_CHECK(q.codes.dtype == DType::U32, where, ".weight: dtype ",
                    dtype_name(q.codes.dtype), ", expected U32 packed codes beside .scales");
  check_shape(q.codes, {rows, cols * bits / 32},
              (where + ".weight (" + std::to_string(bits) + "-bit codes of [" +
               std::to_string(rows) + ", " + std::to_string(cols) + "])")
                  .c_str());
  check_shape(q.scales, {rows, cols / group}, (where + ".scales").c_str());
  check_shape(q.biases, {rows, cols / group}, (where + ".biases").c_str());
  ops::check_quantized(q, where.c_str());  // bits, group size, dtypes
  return ops::Weight::quantized(q);
}

void WeightLoader::place_together(std::initializer_list<std::string> modules) const {
  std::vector<std::string> names;
  for (const std::string& module : modules) {
    if (store_.has(module + ".scales")) return;
    names.push_back(module + ".weight");
  }
  store_.place_together(names);
}

Tensor WeightLoader::required(const std::string& name, std::initializer_list<int64_t> dims) const {
  Tensor t = store_.get(name);
  check_shape(t, dims, (store_.dir() + ": " + name).c_str());
  return t;
}

Tensor WeightLoader::optional(const std::string& name, std::initializer_list<int64_t> dims) const {
  return store_.has(name) ? required(name, dims) : Tensor();
}

AttentionWeights load_attention(const WeightLoader& loader, const std::string& prefix,
                                const DecoderDims& d) {
  const std::string p = prefix + "self_attn.";
  const int64_t q_out = d.heads * d.head_dim, kv_out = d.kv_heads * d.head_dim;
  AttentionWeights w;
  loader.place_together({p + "q_proj", p + "k_proj", p + "v_proj"});
  w.q = loader.matrix(p + "q_proj", q_out, d.hidden);
  w.k = loader.matrix(p + "k_proj", kv_out, d.hidden);
  w.v = loader.matrix(p + "v_proj", kv_out, d.hidden);
  w.o = loader.matrix(p + "o_proj", d.hidden, q_out);
  w.q_bias = loader.optional(p + "q_proj.bias", {q_out});
  w.k_bias = loader.optional(p + "k_proj.bias", {kv_out});
  w.v_bias = loader.optional(p + "v_proj.bias", {kv_out});
  w.o_bias = loader.optional(p + "o_proj.bias", {d.hidden});
  w.q_norm = loader.optional(p + "q_norm.weight", {d.head_dim});
  w.k_norm = loader.optional(p + "k_norm.weight", {d.head_dim});
  RINGLM_USER_CHECK(w.q_norm.empty() == w.k_norm.empty(), loader.dir(), ": ", prefix,
                    " has only one of q_norm / k_norm");
  return w;
}

MlpWeights load_mlp(const WeightLoader& loader, const std::string& prefix, const DecoderDims& d) {
  const std::string p = prefix + "mlp.";
  MlpWeights w;
  loader.place_together({p + "gate_proj", p + "up_proj"});
  w.gate = loader.matrix(p + "gate_proj", d.intermediate, d.hidden);
  w.up = loader.matrix(p + "up_proj", d.intermediate, d.hidden);
  w.down = loader.matrix(p + "down_proj", d.hidden, d.intermediate);
  w.gate_bias = loader.optional(p + "gate_proj.bias", {d.intermediate});
  w.up_bias = loader.optional(p + "up_proj.bias", {d.intermediate});
  w.down_bias = loader.optional(p + "down_proj.bias", {d.hidden});
  return w;
}

StepBuffers StepBuffers::alloc(Arena& arena, int64_t tokens, const DecoderDims& d, DType half) {
  StepBuffers b;
  if (half != DType::F32) {
    b.h_half = arena.alloc(half, {tokens, d.hidden});
    b.act_half = arena.alloc(half, {tokens, d.intermediate});
    b.attn_half = arena.alloc(half, {tokens, d.heads * d.head_dim});
  }
  b.x = arena.alloc(DType::F32, {tokens, d.hidden});
  b.h = arena.alloc(DType::F32, {tokens, d.hidden});
  b.q = arena.alloc(DType::F32, {tokens, d.heads * d.head_dim});
  b.attn = arena.alloc(DType::F32, {tokens, d.heads * d.head_dim});
  b.k = arena.alloc(DType::F32, {tokens, d.kv_heads * d.head_dim});
  b.v = arena.alloc(DType::F32, {tokens, d.kv_heads * d.head_dim});
  b.gate = arena.alloc(DType::F32, {tokens, d.intermediate});
  b.up = arena.alloc(DType::F32, {tokens, d.intermediate});
  return b;
}

size_t StepBuffers::bytes(int64_t max_tokens, int64_t max_logits, const DecoderDims& d) {
  const int64_t per_token =
      2 * d.hidden + 2 * d.heads * d.head_dim + 2 * d.kv_heads * d.head_dim + 2 * d.intermediate;
  const int64_t floats = max_tokens * per_token + max_logits * d.hidden;
  // h_half, act_half, attn_half
  const int64_t halves = max_tokens * (d.hidden + d.intermediate + d.heads * d.head_dim);
  return static_cast<size_t>(floats) * sizeof(float) + static_cast<size_t>(halves) * 2 +
         16 * Arena::kAlignment;
}

Tensor& matmul_feed(Tensor& f32, Tensor& half, std::initializer_list<const ops::Weight*> weights) {
  if (half.empty()) return f32;
  for (const ops::Weight* w : weights)
    if (ops::matmul_input_dtype(*w, f32.size(0)) != half.dtype) return f32;
  return half;
}

Tensor& attention_input(StepBuffers& b, const AttentionWeights& w) {
  return matmul_feed(b.h, b.h_half, {&w.q, &w.k, &w.v});
}

Tensor& mlp_input(StepBuffers& b, const MlpWeights& w) {
  return matmul_feed(b.h, b.h_half, {&w.gate, &w.up});
}

namespace {

// A block's last matmul: into io.out, or added into the stream.
void block_output(const BlockIo& io, StepBuffers& b, const Tensor& x, const ops::Weight& w,
                  const Tensor& bias) {
  if (io.stream == nullptr) return ops::matmul(x, w, bias, *io.out);
  ops::matmul_accumulate(x, w, bias, b.h, *io.stream);
}

}  // namespace

void attention_block(const AttentionWeights& w, const AttentionBlockConfig& config, int layer,
                     const kv::StepPlan& plan, kv::PagedKvCache& cache, StepBuffers& b,
                     const BlockIo& io) {
  const int64_t tokens = plan.num_tokens();
  const kv::StepPlan::Layer step = plan.layer(layer);
  ops::KvLayerView view = cache.layer_view(layer);
  const int64_t heads = b.q.size(1) / view.head_dim(), kv_heads = view.kv_heads(),
                dim = view.head_dim();
  const Tensor positions = plan.positions();
  // q, k and v in one op (one launch of the CUDA decode GEMV); a shared-KV layer reads its
  // donor's K/V instead. Then q/k norm, rope and the K/V write: one op (one CUDA kernel for a
  // 16-bit cache, or none: the fused block's GEMV does them in its store).
  const ops::MatmulTarget qkv_all[] = {
      {&w.q, &w.q_bias, &b.q}, {&w.k, &w.k_bias, &b.k}, {&w.v, &w.v_bias, &b.v}};
  const std::span<const ops::MatmulTarget> qkv(qkv_all, step.writes_kv ? 3 : 1);
  ops::AttentionInputs inputs{b.q.reshape({tokens, heads, dim}), Tensor(), Tensor(), positions,
                              step.slots};
  if (step.writes_kv) {
    inputs.k = b.k.reshape({tokens, kv_heads, dim});
    inputs.v = b.v.reshape({tokens, kv_heads, dim});
  }
  const ops::QkTransform transform{&w.q_norm, &w.k_norm, config.qk_norm, config.rope};
  ops::KvLayerView* written = step.writes_kv ? &view : nullptr;
  if (io.stream != nullptr) {
    ops::matmul_prepare_attention(ops::NormedRows{io.stream, io.norm, io.norm_config}, b.h, qkv,
                                  inputs, transform, written);
  } else {
    ops::matmul_prepare_attention(*io.in, qkv, inputs, transform, written);
  }
  const Tensor& q_heads = inputs.q;
  if (step.writes_kv && step.dense_rows != nullptr) {        // --kv-quant-start: positions < S also
    ops::KvLayerView dense = cache.dense_layer_view(layer);  // stay in bf16
    for (const kv::StepPlan::TokenRange& r : *step.dense_writes) {
      ops::kv_write(inputs.k.slice_rows(r.begin, r.end), inputs.v.slice_rows(r.begin, r.end),
                    step.dense_slots.slice_rows(r.begin, r.end), dense);
    }
  }
  // The KV layer decides what a query sees: window and sinks come from the layer's group.
  ops::AttentionParams params = config.attention;
  params.window = step.window;
  params.sink_tokens = step.sink_tokens;
  // A decode step (one query a row) whose o projection takes 16-bit input gets the attention
  // output rounded by the attention itself (CUDA: in the split-K merge, no conversion pass).
  const bool decode_only = plan.num_tokens() == plan.num_rows() && step.dense_rows == nullptr &&
                           plan.attention_fn() == &ops::attention;
  Tensor& attn = decode_only ? matmul_feed(b.attn, b.attn_half, {&w.o}) : b.attn;
  Tensor attn_heads = attn.reshape({tokens, heads, dim});
  plan.attention_fn()(q_heads, view, *step.rows, params, attn_heads);
  // --kv-quant-start S: `rows` covered the queries at positions >= S; those below read bf16 K/V.
  if (step.dense_rows != nullptr)
    plan.attention_fn()(q_heads, cache.dense_layer_view(layer), *step.dense_rows, params,
                        attn_heads);
  block_output(io, b, attn, w.o, w.o_bias);
}

void mlp_block(const MlpWeights& w, ops::Activation activation, StepBuffers& b, const BlockIo& io) {
  // gate, up and the gated activation: one launch of the CUDA decode GEMV.
  Tensor& act = matmul_feed(b.gate, b.act_half, {&w.down});
  const ops::MatmulTarget gate{&w.gate, &w.gate_bias, &b.gate}, up{&w.up, &w.up_bias, &b.up};
  if (io.stream == nullptr) {
    ops::gated_matmul(*io.in, gate, up, activation, act);
  } else {
    ops::gated_matmul(ops::NormedRows{io.stream, io.norm, io.norm_config}, b.h, gate, up,
                      activation, act);
  }
  block_output(io, b, act, w.down, w.down_bias);
}

namespace {

// Whether the plan wants every token's logits, in token order (decode and verify steps).
bool wants_every_token(const kv::StepPlan& plan, int64_t tokens) {
  const std::vector<int32_t>& wanted = plan.logit_tokens();
  if (static_cast<int64_t>(wanted.size()) != tokens) return false;
  for (int64_t i = 0; i < tokens; ++i)
    if (wanted[static_cast<size_t>(i)] != i) return false;
  return true;
}

}  // namespace

void lm_head(const Tensor& x, const Tensor& final_norm, const ops::Weight& head,
             const LmHeadConfig& config, const kv::StepPlan& plan, Arena& arena, Tensor& logits) {
  const int64_t tokens = x.size(0), hidden = x.size(1);
  const Tensor no_bias;
  if (wants_every_token(plan, tokens)) {
    // No gather: the head reads the stream through the final norm — at 1-2 rows of 16-bit weights
    // in the GEMV (no norm kernel), else the norm writes the head's input dtype (no conversion
    // pass). The same bits as the gathered path: the norm and the head are per row.
    const ops::MatmulTarget head_target{&head, &no_bias, &logits};
    Tensor normed = arena.alloc(ops::matmul_input_dtype(head, tokens), {tokens, hidden});
    ops::matmul_many(ops::NormedRows{&x, &final_norm, config.norm}, normed, {&head_target, 1});
  } else {
    const auto wanted = static_cast<int64_t>(plan.logit_tokens().size());
    Tensor last = arena.alloc(DType::F32, {wanted, hidden});
    // Gathers the wanted tokens' rows: an embedding lookup whose table is x.
    ops::embedding(plan.logit_token_ids(), x, 1.0f, last);
    ops::rms_norm(last, final_norm, config.norm, last);
    ops::matmul(last, head, no_bias, logits);
  }
  if (config.final_softcap > 0) ops::softcap(logits, config.final_softcap);
}

ops::Activation activation_from_name(const std::string& name, const std::string& model_type) {
  if (name == "silu" || name == "swish") return ops::Activation::SiLU;
  if (name == "gelu_pytorch_tanh" || name == "gelu_tanh") return ops::Activation::GeluTanh;
  RINGLM_USER_CHECK(false, "unsupported activation '", name, "' for ", model_type,
                    " (supported: silu, gelu_pytorch_tanh)");
  return ops::Activation::SiLU;
}

}  // namespace ringlm::models
