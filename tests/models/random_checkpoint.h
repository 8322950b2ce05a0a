// Random-weight checkpoints for tests whose shapes the fixtures lack: a config.json body written
// to a per-process temporary folder and filled by `ringlm random-model`'s code. Per process
// because ctest runs tests as parallel processes, and one process rewriting a checkpoint while
// another reads it fails the reader.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/error.h"

namespace ringlm::testing {

// A Llama config with these dims (vocab 512, 4096 positions, rope 10000, silu, untied).
inline std::string llama_config(int hidden, int intermediate, int layers, int heads, int kv_heads,
                                int head_dim) {
  return R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": )" +
         std::to_string(hidden) + R"(, "intermediate_size": )" + std::to_string(intermediate) +
         R"(, "num_hidden_layers": )" + std::to_string(layers) + R"(, "num_attention_heads": )" +
         std::to_string(heads) + R"(, "num_key_value_heads": )" + std::to_string(kv_heads) +
         R"(, "head_dim": )" + std::to_string(head_dim) +
         R"(, "vocab_size": 512, "max_position_embeddings": 4096, "rope_theta": 10000.0,
         "rms_norm_eps": 1e-5, "hidden_act": "silu", "tie_word_embeddings": false,
         "bos_token_id": 1, "eos_token_id": 2})";
}

// Writes the checkpoint <TempDir>/ringlm_<tag>_<pid> (random-model flags: e.g. "--seed=7",
// "--dtype=bf16") and returns its folder.
inline std::string write_random_checkpoint(const std::string& tag, const std::string& config_json,
                                           const std::vector<std::string>& flags) {
  const std::string out =
      ::testing::TempDir() + "/ringlm_" + tag + "_" + std::to_string(::getpid());
  const std::string config = out + ".config.json";
  std::ofstream(config) << config_json;
  std::vector<std::string> args = {"--config=" + config, "--out=" + out};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  RINGLM_CHECK(cli::run_random_model(static_cast<int>(argv.size()), argv.data()) == 0,
               "random-model failed for ", out);
  return out;
}

}  // namespace ringlm::testing
