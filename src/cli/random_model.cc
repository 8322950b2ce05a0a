// `ringlm random-model`: writes a Hugging Face checkpoint directory with random weights of a real
// model's shape (speed does not depend on the weights' values) or of a custom config.json.
// --quantize BITS writes it as mlx-community checkpoints are: every Linear and the embedding as
// MLX affine codes + scales + biases (in --dtype), config.json "quantization".
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/affine_codec.h"

namespace ringlm::cli {

namespace {

nlohmann::json preset(const std::string& name) {
  using nlohmann::json;
  const json base = {{"hidden_act", "silu"}, {"rms_norm_eps", 1e-5},    {"bos_token_id", 1},
                     {"eos_token_id", 2},    {"attention_bias", false}, {"mlp_bias", false}};
  json c = base;
  if (name == "llama-125m") {
    c.update({{"model_type", "llama"},
              {"architectures", {"LlamaForCausalLM"}},
              {"hidden_size", 768},
              {"intermediate_size", 2048},
              {"num_hidden_layers", 12},
              {"num_attention_heads", 12},
              {"num_key_value_heads", 4},
              {"head_dim", 64},
              {"vocab_size", 32000},
              {"max_position_embeddings", 4096},
              {"rope_theta", 500000.0},
              {"tie_word_embeddings", false}});
  } else if (name == "llama-3.1-8b") {
    c.update({{"model_type", "llama"},
              {"architectures", {"LlamaForCausalLM"}},
              {"hidden_size", 4096},
              {"intermediate_size", 14336},
              {"num_hidden_layers", 32},
              {"num_attention_heads", 32},
              {"num_key_value_heads", 8},
              {"head_dim", 128},
              {"vocab_size", 128256},
              {"max_position_embeddings", 131072},
              {"rope_theta", 500000.0},
              {"tie_word_embeddings", false},
              {"rope_scaling",
               {{"rope_type", "llama3"},
                {"factor", 8.0},
                {"low_freq_factor", 1.0},
                {"high_freq_factor", 4.0},
                {"original_max_position_embeddings", 8192}}}});
  } else if (name == "qwen3-8b") {
    c.update({{"model_type", "qwen3"},
              {"architectures", {"Qwen3ForCausalLM"}},
              {"hidden_size", 4096},
              {"intermediate_size", 12288},
              {"num_hidden_layers", 36},
              {"num_attention_heads", 32},
              {"num_key_value_heads", 8},
              {"head_dim", 128},
              {"vocab_size", 151936},
              {"rms_norm_eps", 1e-6},
              {"max_position_embeddings", 40960},
              {"rope_theta", 1000000.0},
              {"tie_word_embeddings", false}});
  } else if (name == "gemma-3-12b") {
    // google/gemma-3-12b-it's text tower: 5 sliding (window 1024) : 1 global layers, 16 q / 8 kv
    // heads of 256, tied embeddings, global rope linearly scaled x8.
    c = {{"model_type", "gemma3_text"},
         {"architectures", {"Gemma3ForCausalLM"}},
         {"hidden_size", 3840},
         {"intermediate_size", 15360},
         {"num_hidden_layers", 48},
         {"num_attention_heads", 16},
         {"num_key_value_heads", 8},
         {"head_dim", 256},
         {"vocab_size", 262208},
         {"rms_norm_eps", 1e-6},
         {"hidden_activation", "gelu_pytorch_tanh"},
         {"query_pre_attn_scalar", 256},
         {"sliding_window", 1024},
         {"sliding_window_pattern", 6},
         {"max_position_embeddings", 131072},
         {"rope_theta", 1000000.0},
         {"rope_local_base_freq", 10000.0},
         {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}},
         {"tie_word_embeddings", true},
         {"bos_token_id", 2},
         {"eos_token_id", 1}};
  } else {
    RINGLM_USER_CHECK(false, "unknown preset '", name,
                      "' (known: llama-125m, llama-3.1-8b, qwen3-8b, gemma-3-12b)");
  }
  return c;
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  float mean = 0, spread = 0;  // uniform in [mean - spread, mean + spread]
};

// Llama-family tensor list (qwen3 adds q/k norms; gemma3_text adds them and the feed-forward
// pre/post norms, whose weights are offsets from 1).
std::vector<TensorSpec> decoder_tensors(const io::ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, i = c.intermediate_size;
  auto linear = [](std::string name, int64_t out, int64_t in) {
    return TensorSpec{std::move(name), {out, in}, 0.0f, std::sqrt(3.0f / static_cast<float>(in))};
  };
  const bool gemma = c.model_type == "gemma3_text";
  auto norm = [gemma](std::string name, int64_t n) {
    return TensorSpec{std::move(name), {n}, gemma ? 0.0f : 1.0f, 0.1f};
  };
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, 0.0f, 1.0f});
  out.push_back(norm("model.norm.weight", h));
  if (!c.tie_word_embeddings) out.push_back(linear("lm_head.weight", c.vocab_size, h));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back(norm(p + "input_layernorm.weight", h));
    out.push_back(norm(p + "post_attention_layernorm.weight", h));
    out.push_back(linear(p + "self_attn.q_proj.weight", q, h));
    out.push_back(linear(p + "self_attn.k_proj.weight", kv, h));
    out.push_back(linear(p + "self_attn.v_proj.weight", kv, h));
    out.push_back(linear(p + "self_attn.o_proj.weight", h, q));
    if (c.model_type == "qwen3" || gemma) {
      out.push_back(norm(p + "self_attn.q_norm.weight", c.head_dim));
      out.push_back(norm(p + "self_attn.k_norm.weight", c.head_dim));
    }
    if (gemma) {
      out.push_back(norm(p + "pre_feedforward_layernorm.weight", h));
      out.push_back(norm(p + "post_feedforward_layernorm.weight", h));
    }
    out.push_back(linear(p + "mlp.gate_proj.weight", i, h));
    out.push_back(linear(p + "mlp.up_proj.weight", i, h));
    out.push_back(linear(p + "mlp.down_proj.weight", h, i));
  }
  return out;
}

// Deterministic per-element values (splitmix64 of seed and index), so threads may split the work.
float random_value(uint64_t seed, uint64_t index, const TensorSpec& spec) {
  uint64_t z = seed + index * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float unit = static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
  return spec.mean + spec.spread * unit;
}

uint16_t to_storage(float value, DType dtype) {
  return dtype == DType::BF16 ? f32_to_bf16(value) : f32_to_f16(value);
}

// The tensors of one MLX-quantized matrix: codes, scales, biases (the values rounded to `dtype`
// first, as a checkpoint of that dtype would be, then quantized; scales and biases in `dtype`).
struct QuantizedBuffers {
  std::vector<uint32_t> codes;
  std::vector<uint16_t> scales, biases;
};
QuantizedBuffers quantize_random(const TensorSpec& spec, uint64_t seed, DType dtype,
                                 const kv::AffineFormat& format) {
  const int64_t rows = spec.shape[0], cols = spec.shape[1];
  const int64_t words = kv::affine_packed_words(cols, format);
  const int64_t groups = kv::affine_groups(cols, format);
  QuantizedBuffers out;
  out.codes.resize(static_cast<size_t>(rows * words));
  out.scales.resize(static_cast<size_t>(rows * groups));
  out.biases.resize(out.scales.size());
  ThreadPool::global().parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols)), scales(static_cast<size_t>(groups)),
        biases(static_cast<size_t>(groups));
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float v = random_value(seed, static_cast<uint64_t>(r * cols + c), spec);
        row[static_cast<size_t>(c)] =
            dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(v)) : f16_to_f32(f32_to_f16(v));
      }
      kv::affine_quantize(row.data(), cols, format, out.codes.data() + r * words, scales.data(),
                          biases.data());
      for (int64_t g = 0; g < groups; ++g) {
        out.scales[static_cast<size_t>(r * groups + g)] =
            to_storage(scales[static_cast<size_t>(g)], dtype);
        out.biases[static_cast<size_t>(r * groups + g)] =
            to_storage(biases[static_cast<size_t>(g)], dtype);
      }
    }
  });
  return out;
}

// Linear and embedding matrices (not norms) are what MLX quantizes.
bool is_quantizable(const TensorSpec& spec) {
  return spec.shape.size() == 2 && spec.name.find("norm") == std::string::npos;
}

}  // namespace

int run_random_model(int argc, char** argv) {
  Args args(argc, argv,
            {"preset", "config", "out", "dtype", "seed", "threads", "quantize", "group-size"});
  if (args.has("threads"))
    ThreadPool::set_global_threads(static_cast<int>(args.integer("threads", 0)));
  const std::string out_dir = args.required("out");
  nlohmann::json config_json;
  if (args.has("config")) {
    std::ifstream in(args.str("config"));
    RINGLM_USER_CHECK(in.good(), "cannot read ", args.str("config"));
    config_json = nlohmann::json::parse(in, nullptr, false);
    RINGLM_USER_CHECK(!config_json.is_discarded(), args.str("config"), ": invalid JSON");
  } else {
    config_json = preset(args.required("preset"));
  }
  const std::string dtype_flag = args.str("dtype", "bf16");
  RINGLM_USER_CHECK(dtype_flag == "bf16" || dtype_flag == "f16", "--dtype must be bf16 or f16");
  const DType dtype = dtype_flag == "bf16" ? DType::BF16 : DType::F16;
  config_json["torch_dtype"] = dtype_flag == "bf16" ? "bfloat16" : "float16";
  const io::ModelConfig config = io::parse_model_config(config_json, "config");
  RINGLM_USER_CHECK(config.model_type == "llama" || config.model_type == "mistral" ||
                        config.model_type == "qwen2" || config.model_type == "qwen3" ||
                        config.model_type == "gemma3_text",
                    "random-model writes Llama-family and gemma3_text checkpoints; got model_type ",
                    config.model_type);
  kv::AffineFormat format{0, 0};
  if (args.has("quantize")) {
    format = {static_cast<int>(args.integer("quantize", 4)),
              static_cast<int>(args.integer("group-size", 64))};
    kv::validate_affine_format(format);
    const nlohmann::json q = {
        {"group_size", format.group_size}, {"bits", format.bits}, {"mode", "affine"}};
    config_json["quantization"] = q;
    config_json["quantization_config"] = q;
  } else {
    RINGLM_USER_CHECK(!args.has("group-size"), "--group-size needs --quantize BITS");
  }
  std::filesystem::create_directories(out_dir);
  {
    std::ofstream cfg(out_dir + "/config.json");
    cfg << config_json.dump(2) << "\n";
  }
  const uint64_t seed = static_cast<uint64_t>(args.integer("seed", 0));
  const auto specs = decoder_tensors(config);
  std::vector<std::vector<uint16_t>> buffers(specs.size());
  std::vector<QuantizedBuffers> quantized(specs.size());
  std::vector<io::TensorToWrite> tensors;
  uint64_t params = 0;
  for (size_t t = 0; t < specs.size(); ++t) {
    int64_t n = 1;
    for (int64_t d : specs[t].shape) n *= d;
    params += static_cast<uint64_t>(n);
    const uint64_t tensor_seed = seed * 1000003ull + t;
    if (format.bits != 0 && is_quantizable(specs[t])) {
      const TensorSpec& spec = specs[t];
      RINGLM_USER_CHECK(spec.shape[1] % format.group_size == 0, spec.name, ": input size ",
                        spec.shape[1], " is not a multiple of --group-size ", format.group_size);
      QuantizedBuffers& q = quantized[t];
      q = quantize_random(spec, tensor_seed, dtype, format);
      const std::string module = spec.name.substr(0, spec.name.size() - 7);  // - ".weight"
      const int64_t groups = spec.shape[1] / format.group_size;
      tensors.push_back({spec.name,
                         DType::U32,
                         {spec.shape[0], spec.shape[1] * format.bits / 32},
                         q.codes.data()});
      tensors.push_back({module + ".scales", dtype, {spec.shape[0], groups}, q.scales.data()});
      tensors.push_back({module + ".biases", dtype, {spec.shape[0], groups}, q.biases.data()});
      continue;
    }
    auto& buf = buffers[t];
    buf.resize(static_cast<size_t>(n));
    ThreadPool::global().parallel_for(n, 1 << 16, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        buf[static_cast<size_t>(e)] =
            to_storage(random_value(tensor_seed, static_cast<uint64_t>(e), specs[t]), dtype);
      }
    });
    tensors.push_back({specs[t].name, dtype, specs[t].shape, buf.data()});
  }
  io::write_safetensors(out_dir + "/model.safetensors", tensors);
  std::string kind = dtype_flag;
  if (format.bits != 0)
    kind += ", MLX " + std::to_string(format.bits) + "-bit g" + std::to_string(format.group_size);
  std::printf("wrote %s: %s, %.1f M parameters (%s)\n", out_dir.c_str(), config.model_type.c_str(),
              static_cast<double>(params) / 1e6, kind.c_str());
  return 0;
}

}  // namespace ringlm::cli
