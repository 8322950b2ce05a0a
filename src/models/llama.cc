#include "models/llama.h"

#include <cmath>

#include "models/decoder.h"
#include "ops/residual_matmul.h"
#include "ops/rope_config.h"

namespace ringlm::models {

namespace {

struct LlamaLayer {
  Tensor input_norm, post_attention_norm;  // [H]
  AttentionWeights attention;
  MlpWeights mlp;
  int window = 0;  // > 0 on sliding-window layers (mistral sliding_window, qwen2 max_window_layers)
};

class LlamaModel final : public Model {
 public:
  LlamaModel(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights)
      : Model(std::move(config), std::move(weights)) {
    const auto& c = config_;
    dims_ = decoder_dims(c);
    activation_ = activation_from_name(c.hidden_act, c.model_type);
    rope_ = ops::make_rope_table(c.rope.at("full_attention"), dims_.head_dim,
                                 c.max_position_embeddings);
    norm_ = {static_cast<float>(c.rms_norm_eps), false};
    load_weights();
  }

  std::vector<kv::LayerKvSpec> kv_layers() const override {
    std::vector<int> windows;
    for (const LlamaLayer& layer : layers_) windows.push_back(layer.window);
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
    ops::embedding(plan.token_ids(), embed_, 1.0f, b.x);
    AttentionBlockConfig attention;
    attention.rope = &rope_;
    attention.attention.scale = 1.0f / std::sqrt(static_cast<float>(dims_.head_dim));
    attention.qk_norm = norm_;
    if (fuses_residual(b.x)) {
      // The blocks' matmuls add into the stream and normalize it on the way in: no norm kernels.
      for (size_t l = 0; l < layers_.size(); ++l) {
        const LlamaLayer& layer = layers_[l];
        attention_block(layer.attention, attention, static_cast<int>(l), plan, cache, b,
                        BlockIo::fused(b.x, layer.input_norm, norm_));
        mlp_block(layer.mlp, activation_, b, BlockIo::fused(b.x, layer.post_attention_norm, norm_));
      }
      lm_head(b.x, final_norm_, lm_head_, {norm_, 0.0f}, plan, arena, logits);
      return;
    }
    // Each residual add is fused with the norm after it (add_rms_norm); the last layer's add
    // stays alone (lm_head normalizes only the rows it needs). The norms write the blocks'
    // matmul inputs: b.h, or b.h_half already rounded (attention_input, mlp_input).
    Tensor* in = &attention_input(b, layers_.front().attention);
    ops::rms_norm(b.x, layers_.front().input_norm, norm_, *in);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LlamaLayer& layer = layers_[l];
      attention_block(layer.attention, attention, static_cast<int>(l), plan, cache, b,
                      BlockIo::plain(*in, b.h));
      in = &mlp_input(b, layer.mlp);
      ops::add_rms_norm(b.x, b.h, layer.post_attention_norm, norm_, *in);
      mlp_block(layer.mlp, activation_, b, BlockIo::plain(*in, b.h));
      if (l + 1 < layers_.size()) {
        in = &attention_input(b, layers_[l + 1].attention);
        ops::add_rms_norm(b.x, b.h, layers_[l + 1].input_norm, norm_, *in);
      } else {
        ops::add_inplace(b.x, b.h);
      }
    }
    lm_head(b.x, final_norm_, lm_head_, {norm_, 0.0f}, plan, arena, logits);
  }

 private:
  // Whether this step's rows run the residual-fused blocks (ops/residual_matmul.h): decided on
  // the first layer's weights; a later layer the backend cannot fuse still runs (unfused).
  bool fuses_residual(const Tensor& x) const {
    const LlamaLayer& first = layers_.front();
    const ops::Weight* weights[] = {&first.attention.q, &first.attention.k, &first.attention.v,
                                    &first.attention.o, &first.mlp.gate,    &first.mlp.up,
                                    &first.mlp.down};
    return ops::residual_fusion_applies({&x, &first.input_norm, norm_}, weights);
  }

  void load_weights() {
    const auto& c = config_;
    const WeightLoader loader(*weights_, c.quantization);
    const EmbeddingAndHead loaded = load_embedding_and_head(loader, "model.", "lm_head.weight", c);
    embed_ = loaded.embed;
    final_norm_ = loaded.final_norm;
    lm_head_ = loaded.lm_head;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      LlamaLayer layer;
      layer.input_norm = loader.required(p + "input_layernorm.weight", {dims_.hidden});
      layer.post_attention_norm =
          loader.required(p + "post_attention_layernorm.weight", {dims_.hidden});
      layer.attention = load_attention(loader, p, dims_);
      layer.mlp = load_mlp(loader, p, dims_);
      const auto idx = static_cast<size_t>(l);
      if (idx < c.layer_types.size() && c.layer_types[idx] == "sliding_attention") {
        layer.window = static_cast<int>(c.sliding_window);
      }
      layers_.push_back(std::move(layer));
    }
  }

  DecoderDims dims_;
  ops::Activation activation_ = ops::Activation::SiLU;
  ops::RopeTable rope_;
  ops::RmsNormConfig norm_;
  ops::Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama(io::ModelConfig config,
                                  std::unique_ptr<io::WeightStore> weights) {
  return std::make_unique<LlamaModel>(std::move(config), std::move(weights));
}

}  // namespace ringlm::models
