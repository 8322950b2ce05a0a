// The Llama family: llama (incl. llama3 rope scaling), mistral, qwen2 (qkv bias), qwen3 (q/k norm).
#pragma once

#include <memory>

#include "models/model.h"

namespace ringlm::models {

std::unique_ptr<Model> make_llama(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights);

}  // namespace ringlm::models
