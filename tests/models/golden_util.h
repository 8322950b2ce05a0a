// Loads the transformers goldens of a fixture model (tests/fixtures/goldens/NAME.safetensors).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace ringlm::testing {

inline std::string fixture_model_dir(const std::string& name) {
  return std::string(RINGLM_FIXTURES_DIR) + "/models/" + name;
}

struct Golden {
  std::vector<int32_t> prompt;
  std::vector<float> logits;  // [prompt, vocab]
  int64_t vocab = 0;
  std::vector<int32_t> greedy;
  std::map<std::string, std::string> metadata;  // the file's __metadata__
};

inline std::string golden_path(const std::string& name) {
  return std::string(RINGLM_FIXTURES_DIR) + "/goldens/" + name + ".safetensors";
}

inline Golden load_golden(const std::string& name) {
  io::SafetensorsFile file(golden_path(name));
  Golden g;
  g.metadata = file.metadata();
  const Tensor prompt = file.get("prompt_ids");
  const Tensor logits = file.get("logits");
  const Tensor greedy = file.get("greedy_ids");
  g.prompt.assign(prompt.ptr<int32_t>(), prompt.ptr<int32_t>() + prompt.numel());
  g.logits.assign(logits.ptr<float>(), logits.ptr<float>() + logits.numel());
  g.vocab = logits.size(1);
  g.greedy.assign(greedy.ptr<int32_t>(), greedy.ptr<int32_t>() + greedy.numel());
  return g;
}

// Every fixture checkpoint under tests/fixtures/models (see its README).
inline const std::vector<std::string>& all_fixtures() {
  static const std::vector<std::string> names = {"llama3",  "llama_yarn", "llama_linear",
                                                 "mistral", "mistral_sw", "qwen2",
                                                 "qwen3",   "gemma2",     "gemma3"};
  return names;
}

}  // namespace ringlm::testing
