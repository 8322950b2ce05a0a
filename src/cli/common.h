// Flag handling shared by the subcommands.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"
#include "engine/runner.h"

namespace ringlm::cli {

// --threads N sizes the global thread pool (default: one per core).
void apply_threads(const Args& args);
// --kv-memory MiB, --max-step-tokens N, --kv-format f32|bf16|f16|int8-g32|int8-g64|int4-g32|
// int4-g64|turbo|turbo:kXvY (every layer; turbo is TurboQuant k8v3, CPU only), --kv-config FILE
// (per-layer formats; default: the model directory's kv_config.json when there is one and no
// --kv-format), --max-kv-size N (bounded KV: full layers become sliding(N - keep) with --kv-keep K
// sink tokens, default 4), --kv-quant-start S (quantized layers keep bf16 K/V for the queries
// before position S, as mlx-lm's quantized_kv_start; CPU only).
engine::RunnerConfig runner_config(const Args& args);
// --device cpu|cuda (default cpu): where the model's weights, KV and activations live.
Device device_flag(const Args& args);
// Whether steps overlap (engine::EngineConfig::overlap_steps): yes unless --no-overlap-steps is
// given or the environment sets RINGLM_OVERLAP_STEPS=0 (same-binary A/Bs).
bool overlap_steps(const Args& args);
// "1,2,3;4,5" -> two prompts; every id must be < vocab_size.
std::vector<std::vector<int32_t>> parse_prompts(const std::string& text, int64_t vocab_size);

}  // namespace ringlm::cli
