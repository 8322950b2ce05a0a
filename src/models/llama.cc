#include "models/llama.h"

#include <cmath>

#include "models/rope_table.h"
#include "ops/ops.h"

namespace ringlm::models {

namespace {

struct LayerWeights {
  Tensor input_norm, post_attention_norm;  // [H]
  Tensor q, k, v, o;                       // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
  Tensor q_bias, k_bias, v_bias, o_bias;   // empty unless the checkpoint has them
  Tensor q_norm, k_norm;                   // [D] (qwen3) or empty
  Tensor gate, up, down;                   // [I, H], [I, H], [H, I]
  Tensor gate_bias, up_bias, down_bias;
  int window = 0;                          // > 0 on sliding-window layers
};

class LlamaModel final : public Model {
 public:
  LlamaModel(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights)
      : Model(std::move(config), std::move(weights)) {
    const auto& c = config_;
    hidden_ = c.hidden_size;
    heads_ = c.num_attention_heads;
    kv_heads_ = c.num_key_value_heads;
    head_dim_ = c.head_dim;
    intermediate_ = c.intermediate_size;
    RINGLM_USER_CHECK(heads_ % kv_heads_ == 0, "num_attention_heads ", heads_,
                      " is not a multiple of num_key_value_heads ", kv_heads_);
    activation_ = c.hidden_act == "silu" ? ops::Activation::SiLU : ops::Activation::GeluTanh;
    RINGLM_USER_CHECK(c.hidden_act == "silu" || c.hidden_act == "gelu_pytorch_tanh",
                      "unsupported hidden_act '", c.hidden_act, "' for ", c.model_type);
    rope_ = make_rope_table(c.rope.at("full_attention"), head_dim_, c.max_position_embeddings);
    load_weights();
  }

  kv::KvCacheConfig kv_shape() const override {
    kv::KvCacheConfig shape;
    shape.num_layers = static_cast<int>(layers_.size());
    shape.kv_heads = static_cast<int>(kv_heads_);
    shape.head_dim = static_cast<int>(head_dim_);
    return shape;
  }

  size_t activation_bytes(int64_t max_tokens, int64_t max_logits) const override {
    const int64_t per_token = 2 * hidden_ + 2 * heads_ * head_dim_ + 2 * kv_heads_ * head_dim_ +
                              2 * intermediate_;
    const int64_t floats = max_tokens * per_token + max_logits * hidden_;
    return static_cast<size_t>(floats) * sizeof(float) + 16 * Arena::kAlignment;
  }

  void forward(const kv::StepPlan& plan, kv::PagedKvCache& cache, Arena& arena,
               Tensor& logits) override {
    const int64_t tokens = plan.num_tokens();
    const auto num_logits = static_cast<int64_t>(plan.logit_tokens().size());
    check_shape(logits, {num_logits, config_.vocab_size}, "logits");
    arena.reset();
    Tensor x = arena.alloc(DType::F32, {tokens, hidden_});
    Tensor h = arena.alloc(DType::F32, {tokens, hidden_});
    Tensor q = arena.alloc(DType::F32, {tokens, heads_ * head_dim_});
    Tensor k = arena.alloc(DType::F32, {tokens, kv_heads_ * head_dim_});
    Tensor v = arena.alloc(DType::F32, {tokens, kv_heads_ * head_dim_});
    Tensor attn = arena.alloc(DType::F32, {tokens, heads_ * head_dim_});
    Tensor gate = arena.alloc(DType::F32, {tokens, intermediate_});
    Tensor up = arena.alloc(DType::F32, {tokens, intermediate_});

    ops::embedding(plan.token_ids(), embed_, 1.0f, x);
    const Tensor positions = plan.positions();
    const ops::RmsNormConfig norm{static_cast<float>(config_.rms_norm_eps), false};
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerWeights& w = layers_[l];
      ops::rms_norm(x, w.input_norm, norm, h);
      ops::matmul(h, w.q, w.q_bias, q);
      ops::matmul(h, w.k, w.k_bias, k);
      ops::matmul(h, w.v, w.v_bias, v);
      Tensor q_heads = q.reshape({tokens, heads_, head_dim_});
      Tensor k_heads = k.reshape({tokens, kv_heads_, head_dim_});
      if (!w.q_norm.empty()) {
        Tensor q_rows = q.reshape({tokens * heads_, head_dim_});
        Tensor k_rows = k.reshape({tokens * kv_heads_, head_dim_});
        ops::rms_norm(q_rows, w.q_norm, norm, q_rows);
        ops::rms_norm(k_rows, w.k_norm, norm, k_rows);
      }
      ops::rope(q_heads, positions, rope_);
      ops::rope(k_heads, positions, rope_);
      ops::KvLayerView kv = cache.layer_view(static_cast<int>(l));
      Tensor v_heads = v.reshape({tokens, kv_heads_, head_dim_});
      ops::kv_write(k_heads, v_heads, plan.slots(), kv);
      ops::AttentionParams params;
      params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
      params.window = w.window;
      Tensor attn_heads = attn.reshape({tokens, heads_, head_dim_});
      ops::attention(q_heads, kv, plan.attention_rows(), params, attn_heads);
      ops::matmul(attn, w.o, w.o_bias, h);
      ops::add_inplace(x, h);

      ops::rms_norm(x, w.post_attention_norm, norm, h);
      ops::matmul(h, w.gate, w.gate_bias, gate);
      ops::matmul(h, w.up, w.up_bias, up);
      ops::gated_activation(gate, up, activation_, gate);
      ops::matmul(gate, w.down, w.down_bias, h);
      ops::add_inplace(x, h);
    }
    // Final norm and LM head only on the tokens whose logits are wanted.
    Tensor last = arena.alloc(DType::F32, {num_logits, hidden_});
    for (int64_t i = 0; i < num_logits; ++i) {
      const int32_t t = plan.logit_tokens()[static_cast<size_t>(i)];
      std::copy_n(x.row<float>(t), hidden_, last.row<float>(i));
    }
    ops::rms_norm(last, final_norm_, norm, last);
    ops::matmul(last, lm_head_, Tensor(), logits);
  }

 private:
  Tensor weight(const std::string& name, std::initializer_list<int64_t> dims) const {
    Tensor t = weights_->get(name);
    check_shape(t, dims, name.c_str());
    return t;
  }
  Tensor optional(const std::string& name, std::initializer_list<int64_t> dims) const {
    return weights_->has(name) ? weight(name, dims) : Tensor();
  }

  void load_weights() {
    const auto& c = config_;
    const int64_t q_out = heads_ * head_dim_, kv_out = kv_heads_ * head_dim_;
    embed_ = weight("model.embed_tokens.weight", {c.vocab_size, hidden_});
    final_norm_ = weight("model.norm.weight", {hidden_});
    if (weights_->has("lm_head.weight")) {
      lm_head_ = weight("lm_head.weight", {c.vocab_size, hidden_});
    } else {
      RINGLM_USER_CHECK(c.tie_word_embeddings, weights_->dir(),
                        ": missing tensor lm_head.weight (and tie_word_embeddings is false)");
      lm_head_ = embed_;
    }
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      LayerWeights w;
      w.input_norm = weight(p + "input_layernorm.weight", {hidden_});
      w.post_attention_norm = weight(p + "post_attention_layernorm.weight", {hidden_});
      w.q = weight(p + "self_attn.q_proj.weight", {q_out, hidden_});
      w.k = weight(p + "self_attn.k_proj.weight", {kv_out, hidden_});
      w.v = weight(p + "self_attn.v_proj.weight", {kv_out, hidden_});
      w.o = weight(p + "self_attn.o_proj.weight", {hidden_, q_out});
      w.q_bias = optional(p + "self_attn.q_proj.bias", {q_out});
      w.k_bias = optional(p + "self_attn.k_proj.bias", {kv_out});
      w.v_bias = optional(p + "self_attn.v_proj.bias", {kv_out});
      w.o_bias = optional(p + "self_attn.o_proj.bias", {hidden_});
      w.q_norm = optional(p + "self_attn.q_norm.weight", {head_dim_});
      w.k_norm = optional(p + "self_attn.k_norm.weight", {head_dim_});
      RINGLM_USER_CHECK(w.q_norm.empty() == w.k_norm.empty(), weights_->dir(), ": layer ", l,
                        " has only one of q_norm / k_norm");
      w.gate = weight(p + "mlp.gate_proj.weight", {intermediate_, hidden_});
      w.up = weight(p + "mlp.up_proj.weight", {intermediate_, hidden_});
      w.down = weight(p + "mlp.down_proj.weight", {hidden_, intermediate_});
      w.gate_bias = optional(p + "mlp.gate_proj.bias", {intermediate_});
      w.up_bias = optional(p + "mlp.up_proj.bias", {intermediate_});
      w.down_bias = optional(p + "mlp.down_proj.bias", {hidden_});
      const auto idx = static_cast<size_t>(l);
      if (idx < c.layer_types.size() && c.layer_types[idx] == "sliding_attention") {
        w.window = static_cast<int>(c.sliding_window);
      }
      layers_.push_back(w);
    }
  }

  int64_t hidden_ = 0, heads_ = 0, kv_heads_ = 0, head_dim_ = 0, intermediate_ = 0;
  ops::Activation activation_ = ops::Activation::SiLU;
  ops::RopeTable rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights) {
  return std::make_unique<LlamaModel>(std::move(config), std::move(weights));
}

}  // namespace ringlm::models
