// Models for the KV tests: the fixture checkpoints, plus "random_d64", a random Llama with
// head_dim 64 (written once per test process by `ringlm random-model`'s code) so that the affine
// KV formats with groups of 64 — which need head_dim % 64 == 0, unlike the fixtures' head dims of
// 16 to 32 — run under a real model too.
#pragma once

#include <string>
#include <vector>

#include "kv/kv_format.h"
#include "models/golden_util.h"
#include "models/random_checkpoint.h"

namespace ringlm::testing {

inline std::string kv_model_dir(const std::string& name) {
  if (name != "random_d64") return fixture_model_dir(name);
  static const std::string dir =
      write_random_checkpoint("random_d64", llama_config(128, 256, 2, 4, 2, 64), {"--seed=7"});
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
