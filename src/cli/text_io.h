// Text in and out for the CLI: a model's tokenizer, its stop tokens, and chat rendering.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ringlm::cli {

// Stop ids: generation_config.json's eos, config.json's eos, the tokenizer's eos.
std::vector<int32_t> stop_tokens(const std::string& model_dir, const Tokenizer& tokenizer);

// Renders `messages` through the checkpoint's chat template (add_generation_prompt = true) and
// tokenizes the result without adding special tokens again (as transformers' apply_chat_template).
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& template_kwargs);

}  // namespace ringlm::cli
