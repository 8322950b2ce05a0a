// Rotary tables from a model's rope configuration, computed as transformers' rope init functions
// (default, linear, llama3, yarn, dynamic at its initial length).
#pragma once

#include <cstdint>

#include "io/model_config.h"
#include "ops/ops.h"

namespace ringlm::models {

ops::RopeTable make_rope_table(const io::RopeScaling& rope,  //
                               int64_t head_dim, int64_t max_position_embeddings);

}  // namespace ringlm::models
