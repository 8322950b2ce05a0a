// Builds a model's RopeTable (inverse frequencies + attention scaling) from its rope config, as
// transformers' ROPE_INIT_FUNCTIONS do: "default", "linear", "llama3" and "yarn". The arithmetic
// follows transformers' float32 tensor ops (scalars rounded to f32 where torch rounds them), so
// the table matches the one transformers builds to within an ulp of pow.
#pragma once

#include <cstdint>

#include "io/model_config.h"
#include "ops/ops.h"

namespace ringlm::ops {

// head_dim: the attention head size; rotary_dim = int(head_dim · partial_rotary_factor).
// max_position_embeddings: config.max_position_embeddings (YaRN's default for
// original_max_position_embeddings). Unknown or unsupported rope_type -> ringlm::Error.
RopeTable make_rope_table(const io::RopeScaling& rope, int64_t head_dim,
                          int64_t max_position_embeddings);

}  // namespace ringlm::ops
