// `ringlm generate`: greedy generation from text (streamed back as text) or from token ids (one
// line of ids per prompt; several prompts run as one continuously batched job). Sampling flags
// (--temperature, --top-p, --top-k, --min-p, --seed, --n) run the text prompt through the Engine.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_run.h"
#include "cli/text_io.h"
#include "engine/engine.h"
#include "engine/runner.h"
#include "tokenizer/detokenizer.h"

namespace ringlm::cli {

namespace {

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
  return line;
}

double rate(int64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}

// The text prompt through the Engine with sampling; choice 0 streams, others print when done.
int generate_sampled(const Args& args, const std::string& dir, models::Model& model) {
  RINGLM_USER_CHECK(args.has("prompt"), "sampling flags need --prompt TEXT");
  const Tokenizer tokenizer = Tokenizer::load(dir);
  engine::EngineConfig config;
  config.runner = runner_config(args);
  config.eos_token_ids = stop_tokens(dir, tokenizer);
  engine::Engine engine(model, tokenizer, config);
  engine::Request request;
  request.prompt = tokenizer.encode(args.str("prompt"));
  request.sampling = sampling_params(args, 1.0f);
  request.stop.max_tokens = args.integer("max-tokens", 32);
  request.n = static_cast<int>(args.integer("n", 1));
  std::vector<std::string> texts(static_cast<size_t>(std::max(request.n, 1)));
  const engine::Usage usage =
      run_to_completion(engine, std::move(request), [&](const engine::Event& e) {
        if (e.choice == 0) {
          std::fputs(e.text.c_str(), stdout);
          std::fflush(stdout);
        } else {
          texts[static_cast<size_t>(e.choice)] += e.text;
        }
      });
  std::printf("\n");
  for (size_t c = 1; c < texts.size(); ++c) std::printf("%s\n", texts[c].c_str());
  std::fprintf(stderr, "prompt %lld tokens, generated %lld tokens\n",
               static_cast<long long>(usage.prompt_tokens),
               static_cast<long long>(usage.completion_tokens));
  return 0;
}

}  // namespace

int run_generate(int argc, char** argv) {
  Args args(argc, argv,
            {"model",
             "prompt",
             "prompt-tokens",
             "max-tokens",
             "threads",
             "kv-memory",
             "gpu-memory-utilization",
             "max-step-tokens",
             "kv-format",
             "kv-config",
             "kv-quant-start",
             "max-kv-size",
             "kv-keep",
             "device",
             "temperature",
             "top-p",
             "top-k",
             "min-p",
             "seed",
             "n"});
  apply_threads(args);
  const std::string dir = args.required("model");
  RINGLM_USER_CHECK(args.has("prompt") != args.has("prompt-tokens"),
                    "give exactly one of --prompt TEXT and --prompt-tokens IDS");
  auto model = models::load_model(dir, device_flag(args));
  if (args.has("n")) return generate_sampled(args, dir, *model);
  for (const auto& flag : sampling_flags()) {
    if (args.has(flag)) return generate_sampled(args, dir, *model);
  }
  engine::Runner runner(*model, runner_config(args));
  engine::GreedyOptions options;
  options.max_new_tokens = args.integer("max-tokens", 32);
  engine::GreedyResult result;
  if (args.has("prompt")) {
    const Tokenizer tokenizer = Tokenizer::load(dir);
    options.stop_token_ids = stop_tokens(dir, tokenizer);
    IncrementalDetokenizer detok(tokenizer, /*skip_special_tokens=*/true);
    options.on_token = [&](size_t, int32_t token) {
      std::fputs(detok.push(token).c_str(), stdout);
      std::fflush(stdout);
    };
    result = engine::generate_greedy(runner, {tokenizer.encode(args.str("prompt"))}, options);
    std::printf("%s\n", detok.flush().c_str());
  } else {
    // Several prompts are separated by ';' ("1,2,3;4,5").
    const auto prompts = parse_prompts(args.required("prompt-tokens"), model->vocab_size());
    for (int64_t eos : model->config().eos_token_ids) {
      options.stop_token_ids.push_back(static_cast<int32_t>(eos));
    }
    result = engine::generate_greedy(runner, prompts, options);
    for (const auto& tokens : result.tokens) std::printf("%s\n", join_ids(tokens).c_str());
  }
  std::fprintf(
      stderr,
      "prompt %lld tokens, generated %lld tokens in %lld steps; prefill %.1f tok/s, "
      "decode %.1f tok/s\n",
      static_cast<long long>(result.prompt_tokens), static_cast<long long>(result.generated_tokens),
      static_cast<long long>(result.steps), rate(result.prompt_tokens, result.prefill_seconds),
      // The first token of each prompt comes from its prefill step.
      rate(result.generated_tokens - static_cast<int64_t>(result.tokens.size()),
           result.decode_seconds));
  return 0;
}

}  // namespace ringlm::cli
