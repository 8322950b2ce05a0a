// Models for the KV tests: the fixture checkpoints, plus "random_d64", a random Llama with
// head_dim 64 (written once per test process by `ringlm random-model`'s code) so that the affine
// KV formats with groups of 64 — which need head_dim % 64 == 0, unlike the fixtures' head dims of
// 16 to 32 — run under a real model too.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/commands.h"
#include "kv/kv_format.h"
#include "models/golden_util.h"

namespace ringlm::testing {

inline std::string kv_model_dir(const std::string& name) {
  if (name != "random_d64") return fixture_model_dir(name);
  static const std::string dir = [] {
    // Per process: ctest runs tests as parallel processes, and one process rewriting the
    // checkpoint's config.json while another reads it fails the reader.
    const std::string out =
        ::testing::TempDir() + "/ringlm_random_d64_" + std::to_string(::getpid());
    const std::string config = out + ".config.json";
    {
      std::ofstream f(config);
      f << R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128,
               "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 512,
               "max_position_embeddings": 4096, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
               "hidden_act": "silu", "tie_word_embeddings": false, "bos_token_id": 1,
               "eos_token_id": 2})";
    }
    std::string a1 = "--config=" + config, a2 = "--out=" + out, a3 = "--seed=7";
    char* argv[] = {a1.data(), a2.data(), a3.data()};
    cli::run_random_model(3, argv);
    return out;
  }();
  return dir;
}

// A prompt for the model: the fixture's golden prompt, or ids from 3 on for random_d64.
inline std::vector<int32_t> kv_model_prompt(const std::string& name) {
  if (name != "random_d64") return load_golden(name).prompt;
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(3 + (i * 37) % 500);
  return ids;
}

// The model's head_dim allows the format (affine groups must divide head_dim; turbo formats
// need a power of two >= 32).
inline bool kv_format_fits(const std::string& name, const std::string& format) {
  const kv::KvFormat f = kv::KvFormat::parse(format);
  if (!f.is_affine() && !f.is_turbo()) return true;
  const int head_dim = name == "random_d64" ? 64
                       : name == "gemma3" || name == "llama_linear" || name == "qwen3"
                           ? 32
                           : 16;  // the other fixtures have head_dim 16 or 24
  if (f.is_turbo()) return head_dim >= 32 && (head_dim & (head_dim - 1)) == 0;
  return head_dim % f.group_size == 0;
}

}  // namespace ringlm::testing
