// config.json and generation_config.json of a Hugging Face checkpoint, parsed into typed structs.
// Accepts both the transformers 4 spelling (rope_theta + rope_scaling) and the transformers 5 one
// (rope_parameters, possibly per layer type), and multimodal configs whose text model sits under
// text_config (gemma3). Missing optional fields take transformers' defaults for the model_type.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringlm::io {

struct RopeScaling {
  // "type" (the old spelling) is read as rope_type.
  std::string rope_type = "default";  // default | linear | llama3 | yarn | dynamic | longrope ...
  double rope_theta = 10000.0;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // 0 when absent: transformers then uses max_position_embeddings (and for yarn the presence of
  // the field changes how the attention factor is derived, so absence is kept visible).
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  std::optional<double> attention_factor;
  bool truncate = true;
  double partial_rotary_factor = 1.0;
};

// MLX-style "quantization" / "quantization_config": {"group_size": 64, "bits": 4, "mode": "affine",
// "<module path>": {"group_size": 64, "bits": 8} | false, ...}.
struct QuantizationConfig {
  int group_size = 0;  // 0: not quantized
  int bits = 0;
  // "affine" for MLX affine quantization (the default when group_size/bits are given); another
  // MLX mode ("mxfp4", ...) or a transformers quant_method ("gptq", "fp8", ...) is recorded here
  // with group_size 0 so that the model loader can refuse it by name.
  std::string mode;
  // Per-module overrides keyed by module path (e.g. "model.layers.0.mlp.down_proj"); a value
  // of group_size 0 means that module is not quantized.
  std::map<std::string, std::pair<int, int>> overrides;  // path -> (group_size, bits)
};

struct ModelConfig {
  std::string model_type;        // of the text model (gemma3 -> gemma3_text)
  std::string outer_model_type;  // as written at the top of config.json
  std::vector<std::string> architectures;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // hidden_act or hidden_activation
  std::string torch_dtype;          // "bfloat16", "float32", ... (empty if absent)

  // Rope per layer type: "full_attention" always present; "sliding_attention" when the model has
  // a separate local base (gemma3 rope_local_base_freq, or transformers 5 per-type parameters).
  std::map<std::string, RopeScaling> rope;

  // Sliding window attention.
  int64_t sliding_window = 0;  // 0: none
  // Per layer: "full_attention" | "sliding_attention" (other kinds a config names, such as
  // "linear_attention", are kept as written). Given by config.json or derived as transformers does
  // (gemma3: sliding_window_pattern, gemma2: alternating, qwen2/3: layers >= max_window_layers,
  // mistral and others: all layers once sliding_window is set). With sliding_window == 0 no layer
  // is "sliding_attention".
  std::vector<std::string> layer_types;

  // Gemma family.
  double query_pre_attn_scalar = 0;    // 0: use head_dim
  double final_logit_softcapping = 0;  // 0: none
  double attn_logit_softcapping = 0;   // 0: none

  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;

  QuantizationConfig quantization;

  nlohmann::json raw;       // the whole config.json, for fields a model family reads itself
  nlohmann::json text_raw;  // the text model's part (== raw unless text_config exists)

  // Rope of a layer: rope[layer_types[layer]] if present, else rope["full_attention"].
  const RopeScaling& rope_for_layer(int64_t layer) const;
  // True when the layer attends within sliding_window (> 0) tokens.
  bool is_sliding_layer(int64_t layer) const;
};

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
  bool do_sample = false;
};

// Throws ringlm::Error naming the file and field on malformed input.
ModelConfig load_model_config(const std::string& model_dir);
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);
// Absent generation_config.json gives defaults (eos from config.json is merged by the caller).
GenerationConfig load_generation_config(const std::string& model_dir);
GenerationConfig parse_generation_config(const nlohmann::json& config, const std::string& source);

// The ids that end generation: generation_config's eos ids, then config.json's, without repeats.
std::vector<int64_t> stop_token_ids(const ModelConfig& config, const GenerationConfig& generation);

}  // namespace ringlm::io
