// `ringlm inspect DIR`: what a checkpoint is, read from config.json and the safetensors headers
// alone (no tensor bytes are read, so it is instant on any size of checkpoint).
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/model.h"

namespace ringlm::cli {

int run_inspect(int argc, char** argv) {
  Args args(argc, argv, {"json"}, {"json"});
  RINGLM_USER_CHECK(args.positional().size() == 1, "usage: ringlm inspect DIR [--json]");
  const std::string dir = args.positional()[0];
  const io::ModelConfig config = io::load_model_config(dir);
  const io::WeightStore weights(dir);
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_dtype;  // dtype -> (tensors, bytes)
  for (const auto& name : weights.names()) {
    const auto& info = weights.info(name);
    auto& entry = by_dtype[std::string(dtype_name(info.dtype))];
    entry.first += 1;
    entry.second += info.end - info.begin;
  }
  // MLX-quantized modules: X.weight holds packed codes beside X.scales / X.biases.
  // Parameters count a quantized matrix's logical values (codes × 32 / bits), not its code words,
  // scales or biases.
  const io::QuantizationConfig& quant = config.quantization;
  int64_t quantized_modules = 0;
  uint64_t parameters = weights.total_parameters();
  for (const auto& name : weights.names()) {
    if (name.size() <= 7 || name.compare(name.size() - 7, 7, ".scales") != 0) continue;
    ++quantized_modules;
    const std::string module = name.substr(0, name.size() - 7);
    const auto it = quant.overrides.find(module);
    const int bits = it != quant.overrides.end() ? it->second.second : quant.bits;
    if (bits <= 0 || !weights.has(module + ".weight")) continue;
    const uint64_t words = weights.info(module + ".weight").numel();
    parameters += words * 32 / static_cast<uint64_t>(bits) - words - 2 * weights.info(name).numel();
  }
  const auto supported = models::supported_model_types();
  const bool is_supported =
      std::find(supported.begin(), supported.end(), config.model_type) != supported.end();
  nlohmann::json out = {
      {"model_type", config.model_type},
      {"architectures", config.architectures},
      {"supported", is_supported},
      {"layers", config.num_hidden_layers},
      {"hidden_size", config.hidden_size},
      {"intermediate_size", config.intermediate_size},
      {"attention_heads", config.num_attention_heads},
      {"kv_heads", config.num_key_value_heads},
      {"head_dim", config.head_dim},
      {"vocab_size", config.vocab_size},
      {"tie_word_embeddings", config.tie_word_embeddings},
      {"rope_type",
       config.rope.count("full_attention") ? config.rope.at("full_attention").rope_type : ""},
      {"sliding_window", config.sliding_window},
      {"tensors", weights.names().size()},
      {"parameters", parameters},
      {"bytes", weights.total_bytes()},
  };
  for (const auto& [dtype, entry] : by_dtype) {
    out["dtypes"][dtype] = {{"tensors", entry.first}, {"bytes", entry.second}};
  }
  if (!quant.mode.empty()) {
    nlohmann::json overrides = nlohmann::json::object();
    for (const auto& [module, format] : quant.overrides)
      overrides[module] =
          format.first == 0 ? nlohmann::json(false)
                            : nlohmann::json{{"group_size", format.first}, {"bits", format.second}};
    out["quantization"] = {{"mode", quant.mode},
                           {"bits", quant.bits},
                           {"group_size", quant.group_size},
                           {"overrides", overrides},
                           {"quantized_modules", quantized_modules}};
  }
  if (args.has("json")) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s (%s)%s\n", config.model_type.c_str(),
              config.architectures.empty() ? "?" : config.architectures[0].c_str(),
              is_supported ? "" : "  [model_type not supported by ringlm]");
  std::printf(
      "  layers %lld, hidden %lld, intermediate %lld, heads %lld (kv %lld), head_dim %lld\n",
      static_cast<long long>(config.num_hidden_layers), static_cast<long long>(config.hidden_size),
      static_cast<long long>(config.intermediate_size),
      static_cast<long long>(config.num_attention_heads),
      static_cast<long long>(config.num_key_value_heads), static_cast<long long>(config.head_dim));
  std::printf("  vocab %lld, tied embeddings %s, rope %s, sliding window %lld\n",
              static_cast<long long>(config.vocab_size), config.tie_word_embeddings ? "yes" : "no",
              out["rope_type"].get<std::string>().c_str(),
              static_cast<long long>(config.sliding_window));
  std::printf("  %zu tensors, %.3f M parameters, %.3f MB\n", weights.names().size(),
              static_cast<double>(parameters) / 1e6,
              static_cast<double>(weights.total_bytes()) / 1e6);
  if (!quant.mode.empty() && quant.mode != "affine") {
    std::printf("  quantization %s  [not supported by ringlm]\n", quant.mode.c_str());
  } else if (!quant.mode.empty()) {
    std::printf("  quantization MLX affine %d-bit, group %d, %lld modules quantized", quant.bits,
                quant.group_size, static_cast<long long>(quantized_modules));
    if (!quant.overrides.empty()) std::printf(", %zu per-module overrides", quant.overrides.size());
    std::printf("\n");
    for (const auto& [module, format] : quant.overrides) {
      if (format.first == 0)
        std::printf("    %s: not quantized\n", module.c_str());
      else
        std::printf("    %s: %d-bit, group %d\n", module.c_str(), format.second, format.first);
    }
  }
  for (const auto& [dtype, entry] : by_dtype) {
    std::printf("  %-5s %6llu tensors %12.3f MB\n", dtype.c_str(),
                static_cast<unsigned long long>(entry.first),
                static_cast<double>(entry.second) / 1e6);
  }
  return 0;
}

}  // namespace ringlm::cli
