// The Gemma family: gemma2 (alternating sliding/global layers, attention and final-logit
// soft-capping) and gemma3 (gemma3_text, and the text tower of gemma3 checkpoints: sliding/global
// layers with their own rope bases, q/k norm). Both: pre/post norms around attention and MLP,
// (1 + w) RMSNorm, embeddings scaled by sqrt(hidden), GELU-tanh.
#pragma once

#include <memory>

#include "models/model.h"

namespace ringlm::models {

std::unique_ptr<Model> make_gemma(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights);

}  // namespace ringlm::models
