// Flag handling shared by the subcommands.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"
#include "engine/runner.h"

namespace ringlm::cli {

// --threads N sizes the global thread pool (default: one per core).
void apply_threads(const Args& args);
// --kv-memory MiB, --max-step-tokens N, --kv-format f32|bf16|f16, --max-kv-size N (bounded KV:
// full layers become sliding(N - keep) with --kv-keep K sink tokens, default 4).
engine::RunnerConfig runner_config(const Args& args);
// --device cpu|cuda (default cpu): where the model's weights, KV and activations live.
Device device_flag(const Args& args);
// "1,2,3;4,5" -> two prompts; every id must be < vocab_size.
std::vector<std::vector<int32_t>> parse_prompts(const std::string& text, int64_t vocab_size);

}  // namespace ringlm::cli
