// The CLI's use of the Engine: sampling flags and running one request to completion.
#pragma once

#include <functional>

#include "cli/args.h"
#include "engine/engine.h"

namespace ringlm::cli {

// The names of the sampling flags (--temperature, --top-p, --top-k, --min-p, --seed).
const std::vector<std::string>& sampling_flags();
// Sampling from those flags; `temperature` when --temperature is absent.
engine::SamplingParams sampling_params(const Args& args, float temperature);
// Submits the request and blocks until it is done; on_event runs on the engine thread.
engine::Usage run_to_completion(engine::Engine& engine, engine::Request request,
                                std::function<void(const engine::Event&)> on_event);

}  // namespace ringlm::cli
