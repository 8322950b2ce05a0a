// config.json / generation_config.json parsing. The inputs are real checkpoints' configs (trimmed)
// in the transformers 4 and 5 spellings; expected values are what transformers' configuration
// classes give for them, defaults included.
#include "io/model_config.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"

namespace ringlm::io {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::expect_mentions;
using testing::TempDir;

ModelConfig parse(const std::string& text) {
  return parse_model_config(json::parse(text), "m/config.json");
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse(text); });
}

// Meta-Llama-3.1-8B-Instruct.
const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 128256})";

TEST(ModelConfig, Llama31RopeScaling) {
  const ModelConfig c = parse(kLlama31);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.outer_model_type, "llama");
  EXPECT_EQ(c.architectures, std::vector<std::string>{"LlamaForCausalLM"});
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // hidden_size / num_attention_heads
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  ASSERT_EQ(c.rope.size(), 1u);
  const RopeScaling& r = c.rope.at("full_attention");
  EXPECT_EQ(r.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(r.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(r.factor, 8.0);
  EXPECT_DOUBLE_EQ(r.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(r.high_freq_factor, 4.0);
  EXPECT_EQ(r.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.layer_types, std::vector<std::string>(32, "full_attention"));
  EXPECT_EQ(&c.rope_for_layer(31), &r);
  EXPECT_FALSE(c.is_sliding_layer(0));
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{128000});
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.quantization.group_size, 0);
  EXPECT_EQ(c.raw["pretraining_tp"], 1);
  EXPECT_EQ(c.text_raw, c.raw);
}

TEST(ModelConfig, LlamaDefaults) {
  const ModelConfig c = parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "rope_scaling": null})");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope.at("full_attention").rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope.at("full_attention").rope_theta, 10000.0);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.max_position_embeddings, 2048);
}

TEST(ModelConfig, EosTokenIdIntListOrNull) {
  const std::string base = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "vocab_size": 100, )";
  EXPECT_EQ(parse(base + R"("eos_token_id": 7})").eos_token_ids, std::vector<int64_t>{7});
  EXPECT_EQ(parse(base + R"("eos_token_id": [7, 9]})").eos_token_ids, (std::vector<int64_t>{7, 9}));
  EXPECT_TRUE(parse(base + R"("eos_token_id": null})").eos_token_ids.empty());
  expect_mentions(parse_error(base + R"("eos_token_id": [7, "x"]})"),
                  {"m/config.json", "'eos_token_id'", "list of integers"});
}

TEST(ModelConfig, LegacyRopeTypeKey) {
  const ModelConfig c = parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "vocab_size": 100, "rope_theta": 20000,
      "rope_scaling": {"type": "linear", "factor": 2.0}})");
  EXPECT_EQ(c.rope.at("full_attention").rope_type, "linear");
  EXPECT_DOUBLE_EQ(c.rope.at("full_attention").factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope.at("full_attention").rope_theta, 20000.0);
}

// transformers 5 spelling: rope_parameters carries rope_theta; qwen3's head_dim default is 128.
TEST(ModelConfig, Transformers5RopeParameters) {
  const ModelConfig c = parse(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
      "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16,
      "num_key_value_heads": 8, "vocab_size": 151936, "intermediate_size": 3072,
      "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "dtype": "bfloat16",
      "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1000000.0,
                          "original_max_position_embeddings": 32768, "beta_fast": 16},
      "use_sliding_window": false, "sliding_window": null, "max_window_layers": 28,
      "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"],
      "bos_token_id": 151643, "eos_token_id": 151645})");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  const RopeScaling& r = c.rope.at("full_attention");
  EXPECT_EQ(r.rope_type, "yarn");
  EXPECT_DOUBLE_EQ(r.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(r.factor, 4.0);
  EXPECT_EQ(r.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(r.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(r.beta_slow, 1.0);
  EXPECT_FALSE(r.attention_factor.has_value());
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
}

// google/gemma-3-4b-it: a multimodal config whose text_config relies on Gemma3TextConfig defaults.
const char* kGemma3Multimodal = R"({
  "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
  "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
  "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
  "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                  "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                  "sliding_window": 1024},
  "torch_dtype": "bfloat16",
  "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}})";

TEST(ModelConfig, Gemma3NestedTextConfigWithPerTypeRope) {
  const ModelConfig c = parse(kGemma3Multimodal);
  EXPECT_EQ(c.outer_model_type, "gemma3");
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.text_raw["hidden_size"], 2560);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_hidden_layers, 34);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_EQ(c.final_logit_softcapping, 0);
  EXPECT_EQ(c.torch_dtype, "bfloat16");  // from the outer config
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(0));

  ASSERT_EQ(c.rope.size(), 2u);
  const RopeScaling& global = c.rope.at("full_attention");
  EXPECT_EQ(global.rope_type, "linear");
  EXPECT_DOUBLE_EQ(global.factor, 8.0);
  EXPECT_DOUBLE_EQ(global.rope_theta, 1e6);
  const RopeScaling& local = c.rope.at("sliding_attention");
  EXPECT_EQ(local.rope_type, "default");
  EXPECT_DOUBLE_EQ(local.factor, 1.0);
  EXPECT_DOUBLE_EQ(local.rope_theta, 1e4);

  EXPECT_EQ(c.sliding_window, 1024);
  ASSERT_EQ(c.layer_types.size(), 34u);
  for (int64_t i = 0; i < 34; ++i) {
    const bool full = (i + 1) % 6 == 0;  // layers 5, 11, 17, 23, 29
    EXPECT_EQ(c.layer_types[static_cast<size_t>(i)], full ? "full_attention" : "sliding_attention")
        << i;
    EXPECT_EQ(c.is_sliding_layer(i), !full) << i;
    EXPECT_DOUBLE_EQ(c.rope_for_layer(i).rope_theta, full ? 1e6 : 1e4) << i;
  }
}

TEST(ModelConfig, Gemma3Transformers5PerLayerTypeRopeParameters) {
  const ModelConfig c =
      parse(R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
      "hidden_size": 640, "num_hidden_layers": 4, "num_attention_heads": 4,
      "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144, "sliding_window": 512,
      "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
      "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
      "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
      "final_logit_softcapping": null, "dtype": "bfloat16"})");
  EXPECT_EQ(c.layer_types[2], "full_attention");
  EXPECT_EQ(c.rope_for_layer(2).rope_type, "linear");
  EXPECT_DOUBLE_EQ(c.rope_for_layer(2).factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_for_layer(3).rope_theta, 1e4);
  EXPECT_EQ(c.rope_for_layer(3).rope_type, "default");
  EXPECT_TRUE(c.is_sliding_layer(0));
  EXPECT_FALSE(c.is_sliding_layer(2));
  EXPECT_EQ(c.num_key_value_heads, 1);
  // A sliding entry without rope_theta takes rope_local_base_freq's default, not the global one.
  const ModelConfig d = parse(R"({"model_type": "gemma3_text", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10,
      "rope_parameters": {"full_attention": {"rope_type": "default"},
                          "sliding_attention": {"rope_type": "default"}}})");
  EXPECT_DOUBLE_EQ(d.rope.at("full_attention").rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(d.rope.at("sliding_attention").rope_theta, 1e4);
}

TEST(ModelConfig, Gemma3LocalBaseFreqAndPattern) {
  const ModelConfig c = parse(R"({"model_type": "gemma3_text", "hidden_size": 64,
      "num_hidden_layers": 5, "num_attention_heads": 4, "vocab_size": 10, "rope_theta": 500000,
      "rope_local_base_freq": 20000, "sliding_window_pattern": 2, "sliding_window": 16})");
  EXPECT_EQ(c.layer_types,
            (std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention",
                                      "full_attention", "sliding_attention"}));
  EXPECT_DOUBLE_EQ(c.rope.at("full_attention").rope_theta, 500000);
  EXPECT_DOUBLE_EQ(c.rope.at("sliding_attention").rope_theta, 20000);
}

TEST(ModelConfig, Gemma2AlternatesSlidingAndFull) {
  const ModelConfig c = parse(R"({"model_type": "gemma2", "hidden_size": 2304,
      "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
      "vocab_size": 256000, "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096})");
  EXPECT_EQ(c.layer_types, (std::vector<std::string>{"sliding_attention", "full_attention",
                                                     "sliding_attention", "full_attention"}));
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope.size(), 1u);
  EXPECT_DOUBLE_EQ(c.rope_for_layer(0).rope_theta, 10000.0);
}

TEST(ModelConfig, MistralSlidingWindow) {
  const std::string base = R"({"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 3,
      "num_attention_heads": 16, "vocab_size": 100)";
  const ModelConfig set = parse(base + R"(, "num_key_value_heads": 2, "sliding_window": 32})");
  EXPECT_EQ(set.sliding_window, 32);
  EXPECT_EQ(set.layer_types, std::vector<std::string>(3, "sliding_attention"));
  const ModelConfig none = parse(base + R"(, "num_key_value_heads": 2, "sliding_window": null})");
  EXPECT_EQ(none.sliding_window, 0);
  EXPECT_EQ(none.layer_types, std::vector<std::string>(3, "full_attention"));
  // Absent keys take MistralConfig's defaults: sliding_window 4096, num_key_value_heads 8.
  const ModelConfig absent = parse(base + "}");
  EXPECT_EQ(absent.sliding_window, 4096);
  EXPECT_EQ(absent.num_key_value_heads, 8);
  EXPECT_FALSE(absent.tie_word_embeddings);
  // An explicit null num_key_value_heads means multi-head attention.
  EXPECT_EQ(parse(base + R"(, "num_key_value_heads": null})").num_key_value_heads, 16);
}

TEST(ModelConfig, Qwen2UseSlidingWindowAndMaxWindowLayers) {
  const std::string base = R"({"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 4,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
      "sliding_window": 16, "max_window_layers": 2, )";
  const ModelConfig on = parse(base + R"("use_sliding_window": true})");
  EXPECT_EQ(on.sliding_window, 16);
  EXPECT_EQ(on.layer_types, (std::vector<std::string>{"full_attention", "full_attention",
                                                      "sliding_attention", "sliding_attention"}));
  const ModelConfig off = parse(base + R"("use_sliding_window": false})");
  EXPECT_EQ(off.sliding_window, 0);
  EXPECT_EQ(off.layer_types, std::vector<std::string>(4, "full_attention"));
  EXPECT_FALSE(off.tie_word_embeddings);
  EXPECT_EQ(off.head_dim, 16);
}

TEST(ModelConfig, MlxQuantization) {
  const ModelConfig c = parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100,
      "quantization": {"group_size": 64, "bits": 4,
                       "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8},
                       "lm_head": false},
      "quantization_config": {"group_size": 64, "bits": 4}})");
  EXPECT_EQ(c.quantization.group_size, 64);
  EXPECT_EQ(c.quantization.bits, 4);
  EXPECT_EQ(c.quantization.mode, "affine");
  ASSERT_EQ(c.quantization.overrides.size(), 2u);
  EXPECT_EQ(c.quantization.overrides.at("model.layers.0.mlp.down_proj"), std::make_pair(32, 8));
  EXPECT_EQ(c.quantization.overrides.at("lm_head"), std::make_pair(0, 0));

  const ModelConfig hf = parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100,
      "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})");
  EXPECT_EQ(hf.quantization.group_size, 0);
  EXPECT_EQ(hf.quantization.mode, "fp8");
  expect_mentions(parse_error(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "quantization": {"group_size": 64, "bits": 12}})"),
                  {"m/config.json", "'quantization.bits'"});
}

TEST(ModelConfigErrors, MissingRequiredFields) {
  for (const char* field :
       {"hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"}) {
    json config = json::parse(kLlama31);
    config.erase(field);
    expect_mentions(error_of([&] { parse_model_config(config, "m/config.json"); }),
                    {"m/config.json", std::string("'") + field + "'", "missing"});
  }
  json config = json::parse(kLlama31);
  config.erase("model_type");
  expect_mentions(error_of([&] { parse_model_config(config, "m/config.json"); }),
                  {"m/config.json", "'model_type'"});
}

TEST(ModelConfigErrors, WrongFieldTypes) {
  auto with = [](const char* key, json value) {
    json config = json::parse(kLlama31);
    config[key] = std::move(value);
    return error_of([&] { parse_model_config(config, "m/config.json"); });
  };
  expect_mentions(with("hidden_size", "4096"),
                  {"m/config.json", "'hidden_size'", "integer", "string"});
  expect_mentions(with("num_hidden_layers", 2.5), {"'num_hidden_layers'", "integer"});
  expect_mentions(with("tie_word_embeddings", "yes"), {"'tie_word_embeddings'", "true or false"});
  expect_mentions(with("rms_norm_eps", "small"), {"'rms_norm_eps'", "number"});
  expect_mentions(with("rope_scaling", json{{"rope_type", "llama3"}, {"factor", "8"}}),
                  {"'rope_scaling.factor'", "number"});
  expect_mentions(with("rope_scaling", "llama3"), {"'rope_scaling'", "object"});
  expect_mentions(with("layer_types", json::array({"full_attention"})),
                  {"'layer_types'", "1 entries", "32 layers"});
  expect_mentions(with("num_key_value_heads", 5), {"'num_key_value_heads'", "divide"});
  expect_mentions(with("hidden_size", -4), {"'hidden_size'", "positive"});
  expect_mentions(with("text_config", 3), {"'text_config'", "object"});

  json gemma = json::parse(kGemma3Multimodal);
  gemma["text_config"]["num_hidden_layers"] = "34";
  expect_mentions(error_of([&] { parse_model_config(gemma, "m/config.json"); }),
                  {"m/config.json", "'text_config.num_hidden_layers'"});
  expect_mentions(error_of([&] { parse_model_config(json::array(), "m/config.json"); }),
                  {"m/config.json", "JSON object"});
}

TEST(ModelConfigErrors, Files) {
  TempDir dir;
  expect_mentions(error_of([&] { load_model_config(dir.path()); }), {"config.json", dir.path()});
  testing::write_bytes(dir.file("config.json"), R"({"model_type": "llama", "hidden_size": )");
  expect_mentions(error_of([&] { load_model_config(dir.path()); }),
                  {dir.file("config.json"), "not valid JSON"});
  testing::write_bytes(dir.file("config.json"), kLlama31);
  EXPECT_EQ(load_model_config(dir.path()).hidden_size, 4096);
}

TEST(GenerationConfig, ParsesAndMergesStopTokens) {
  TempDir dir;
  const GenerationConfig absent = load_generation_config(dir.path());
  EXPECT_TRUE(absent.eos_token_ids.empty());
  EXPECT_FALSE(absent.temperature.has_value());
  EXPECT_FALSE(absent.do_sample);

  testing::write_bytes(dir.file("generation_config.json"), R"({"bos_token_id": 128000,
      "do_sample": true, "eos_token_id": [128009, 128001], "temperature": 0.6, "top_p": 0.9,
      "top_k": 50, "repetition_penalty": 1.1, "max_new_tokens": 256, "pad_token_id": null})");
  const GenerationConfig g = load_generation_config(dir.path());
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{128009, 128001}));
  EXPECT_EQ(g.bos_token_id, std::optional<int64_t>(128000));
  EXPECT_FALSE(g.pad_token_id.has_value());
  EXPECT_TRUE(g.do_sample);
  EXPECT_DOUBLE_EQ(*g.temperature, 0.6);
  EXPECT_DOUBLE_EQ(*g.top_p, 0.9);
  EXPECT_EQ(g.top_k, std::optional<int64_t>(50));
  EXPECT_DOUBLE_EQ(*g.repetition_penalty, 1.1);
  EXPECT_EQ(g.max_new_tokens, std::optional<int64_t>(256));

  const ModelConfig c = parse(kLlama31);
  EXPECT_EQ(stop_token_ids(c, g), (std::vector<int64_t>{128009, 128001, 128008}));

  testing::write_bytes(dir.file("generation_config.json"), R"({"temperature": "hot"})");
  expect_mentions(error_of([&] { load_generation_config(dir.path()); }),
                  {"generation_config.json", "'temperature'", "number"});
  testing::write_bytes(dir.file("generation_config.json"), "{");
  expect_mentions(error_of([&] { load_generation_config(dir.path()); }),
                  {"generation_config.json", "not valid JSON"});
}

}  // namespace
}  // namespace ringlm::io
