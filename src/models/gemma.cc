#include "models/gemma.h"

#include <cmath>

#include "models/decoder.h"
#include "ops/rope_config.h"

namespace ringlm::models {

namespace {

struct GemmaLayer {
  Tensor input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;  // [H]
  AttentionWeights attention;
  MlpWeights mlp;
  bool sliding = false;
};

// Where the text model's tensors live: gemma3_text / gemma2 checkpoints use "model.", gemma3
// multimodal ones "model.language_model." (transformers 5) or "language_model.model." (4.x).
struct TensorPrefixes {
  std::string model;    // prefix of embed_tokens, layers, norm
  std::string lm_head;  // full name of an untied LM head
};

TensorPrefixes find_prefixes(const WeightLoader& loader) {
  for (const TensorPrefixes& p :
       {TensorPrefixes{"model.", "lm_head.weight"},
        TensorPrefixes{"model.language_model.", "lm_head.weight"},
        TensorPrefixes{"language_model.model.", "language_model.lm_head.weight"}}) {
    if (loader.has(p.model + "embed_tokens.weight")) return p;
  }
  RINGLM_USER_CHECK(false, loader.dir(),
                    ": no embed_tokens.weight under model., "
                    "model.language_model. or language_model.model.");
  return {};
}

class GemmaModel final : public Model {
 public:
  GemmaModel(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights)
      : Model(std::move(config), std::move(weights)) {
    const auto& c = config_;
    dims_ = decoder_dims(c);
    activation_ = activation_from_name(c.hidden_act, c.model_type);
    norm_ = {static_cast<float>(c.rms_norm_eps), true};
    global_rope_ = ops::make_rope_table(c.rope.at("full_attention"), dims_.head_dim,
                                        c.max_position_embeddings);
    const auto local = c.rope.find("sliding_attention");
    local_rope_ = local == c.rope.end() ? global_rope_
                                        : ops::make_rope_table(local->second, dims_.head_dim,
                                                               c.max_position_embeddings);
    const double scalar =
        c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(dims_.head_dim);
    attention_scale_ = static_cast<float>(1.0 / std::sqrt(scalar));
    load_weights();
  }

  std::vector<kv::LayerKvSpec> kv_layers() const override {
    std::vector<int> windows;
    for (const GemmaLayer& layer : layers_) {
      windows.push_back(layer.sliding ? static_cast<int>(config_.sliding_window) : 0);
    }
    return kv_specs(dims_, windows);
  }

  size_t activation_bytes(int64_t max_tokens, int64_t max_logits) const override {
    return StepBuffers::bytes(max_tokens, max_logits, dims_);
  }

  void forward(const kv::StepPlan& plan, kv::PagedKvCache& cache, Arena& arena,
               Tensor& logits) override {
    arena.reset();
    const int64_t tokens = plan.num_tokens();
    StepBuffers b = StepBuffers::alloc(
        arena, tokens, dims_, ops::matmul_input_dtype(layers_.front().attention.q, tokens));
    ops::embedding(plan.token_ids(), embed_, embed_scale_, b.x);
    AttentionBlockConfig attention;
    attention.attention.scale = attention_scale_;
    attention.attention.softcap = static_cast<float>(config_.attn_logit_softcapping);
    attention.qk_norm = norm_;
    // Each residual add is fused with the norm after it (add_rms_norm); the last layer's add
    // stays alone (lm_head normalizes only the rows it needs). The pre-norms write the blocks'
    // matmul inputs: b.h, or b.h_half already rounded (attention_input, mlp_input).
    Tensor* in = &attention_input(b, layers_.front().attention);
    ops::rms_norm(b.x, layers_.front().input_norm, norm_, *in);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const GemmaLayer& layer = layers_[l];
      attention.rope = layer.sliding ? &local_rope_ : &global_rope_;
      attention_block(layer.attention, attention, static_cast<int>(l), plan, cache, b,
                      BlockIo::plain(*in, b.h));
      ops::rms_norm(b.h, layer.post_attention_norm, norm_, b.h);
      in = &mlp_input(b, layer.mlp);
      ops::add_rms_norm(b.x, b.h, layer.pre_feedforward_norm, norm_, *in);
      mlp_block(layer.mlp, activation_, b, BlockIo::plain(*in, b.h));
      ops::rms_norm(b.h, layer.post_feedforward_norm, norm_, b.h);
      if (l + 1 < layers_.size()) {
        in = &attention_input(b, layers_[l + 1].attention);
        ops::add_rms_norm(b.x, b.h, layers_[l + 1].input_norm, norm_, *in);
      } else {
        ops::add_inplace(b.x, b.h);
      }
    }
    lm_head(b.x, final_norm_, lm_head_,
            {norm_, static_cast<float>(config_.final_logit_softcapping)}, plan, arena, logits);
  }

 private:
  void load_weights() {
    const auto& c = config_;
    const WeightLoader loader(*weights_, c.quantization);
    const TensorPrefixes prefixes = find_prefixes(loader);
    const EmbeddingAndHead loaded =
        load_embedding_and_head(loader, prefixes.model, prefixes.lm_head, c);
    embed_ = loaded.embed;
    final_norm_ = loaded.final_norm;
    lm_head_ = loaded.lm_head;
    // transformers keeps sqrt(hidden) in the embedding's dtype, so a bf16 checkpoint scales by
    // the bf16-rounded value.
    const float scale = std::sqrt(static_cast<float>(dims_.hidden));
    // (A quantized table's dtype is its scales', the dtype of the checkpoint it came from.)
    const DType embed_dtype = embed_.float_dtype();
    embed_scale_ = embed_dtype == DType::BF16  ? bf16_to_f32(f32_to_bf16(scale))
                   : embed_dtype == DType::F16 ? f16_to_f32(f32_to_f16(scale))
                                               : scale;
    RINGLM_USER_CHECK(c.layer_types.size() == static_cast<size_t>(c.num_hidden_layers),
                      loader.dir(), ": layer_types has ", c.layer_types.size(), " entries for ",
                      c.num_hidden_layers, " layers");
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = prefixes.model + "layers." + std::to_string(l) + ".";
      GemmaLayer layer;
      layer.input_norm = loader.required(p + "input_layernorm.weight", {dims_.hidden});
      layer.post_attention_norm =
          loader.required(p + "post_attention_layernorm.weight", {dims_.hidden});
      layer.pre_feedforward_norm =
          loader.required(p + "pre_feedforward_layernorm.weight", {dims_.hidden});
      layer.post_feedforward_norm =
          loader.required(p + "post_feedforward_layernorm.weight", {dims_.hidden});
      layer.attention = load_attention(loader, p, dims_);
      layer.mlp = load_mlp(loader, p, dims_);
      layer.sliding = c.layer_types[static_cast<size_t>(l)] == "sliding_attention";
      RINGLM_USER_CHECK(!layer.sliding || c.sliding_window > 0, loader.dir(),
                        ": sliding layer without sliding_window");
      layers_.push_back(std::move(layer));
    }
  }

  DecoderDims dims_;
  ops::Activation activation_ = ops::Activation::GeluTanh;
  ops::RmsNormConfig norm_;
  ops::RopeTable global_rope_, local_rope_;
  float attention_scale_ = 1.0f;
  float embed_scale_ = 1.0f;
  ops::Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<GemmaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gemma(io::ModelConfig config,
                                  std::unique_ptr<io::WeightStore> weights) {
  return std::make_unique<GemmaModel>(std::move(config), std::move(weights));
}

}  // namespace ringlm::models
