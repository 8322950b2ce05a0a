#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "engine/runner.h"

namespace ringlm::cli {

int run_generate(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "prompt-tokens", "max-tokens", "threads", "kv-memory", "max-step-tokens",
             "kv-format", "max-kv-size", "kv-keep"});
  apply_threads(args);
  auto model = models::load_model(args.required("model"));
  // Several prompts are separated by ';' ("1,2,3;4,5") and run as one continuously batched job.
  std::vector<std::vector<int32_t>> prompts =
      parse_prompts(args.required("prompt-tokens"), model->vocab_size());
  engine::Runner runner(*model, runner_config(args));
  engine::GreedyOptions options;
  options.max_new_tokens = args.integer("max-tokens", 32);
  for (int64_t eos : model->config().eos_token_ids)
    options.stop_token_ids.push_back(static_cast<int32_t>(eos));
  const engine::GreedyResult result = engine::generate_greedy(runner, prompts, options);
  for (const auto& tokens : result.tokens) {
    std::string line;
    for (size_t i = 0; i < tokens.size(); ++i) line += (i ? "," : "") + std::to_string(tokens[i]);
    std::printf("%s\n", line.c_str());
  }
  std::fprintf(stderr,
               "prompt %lld tokens, generated %lld tokens in %lld steps; prefill %.1f tok/s, "
               "decode %.1f tok/s\n",
               static_cast<long long>(result.prompt_tokens),
               static_cast<long long>(result.generated_tokens),
               static_cast<long long>(result.steps),
               result.prefill_seconds > 0
                   ? static_cast<double>(result.prompt_tokens) / result.prefill_seconds
                   : 0.0,
               result.decode_seconds > 0
                   ? static_cast<double>(result.generated_tokens) / result.decode_seconds
                   : 0.0);
  return 0;
}

}  // namespace ringlm::cli
