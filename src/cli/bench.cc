// `ringlm bench`: prefill and decode throughput of a model on random prompt tokens (greedy), and
// the KV cache's bytes per token (K and V of every layer, in the layers' formats). The numbers go
// to docs/benchmarks.md next to a same-run reference; unit tests never time anything.
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/thread_pool.h"
#include "engine/runner.h"

namespace ringlm::cli {

int run_bench(int argc, char** argv) {
  Args args(
      argc, argv,
      {"model", "prompt-len", "gen", "batch", "threads", "kv-memory", "max-step-tokens",
       "kv-format", "kv-config", "kv-quant-start", "max-kv-size", "kv-keep", "repeat", "json"},
      {"json"});
  apply_threads(args);
  auto model = models::load_model(args.required("model"));
  const int64_t prompt_len = args.integer("prompt-len", 128);
  const int64_t gen = args.integer("gen", 128);
  const int64_t batch = args.integer("batch", 1);
  const int64_t repeat = args.integer("repeat", 3);
  RINGLM_USER_CHECK(prompt_len >= 1 && gen >= 1 && batch >= 1 && repeat >= 1,
                    "--prompt-len, --gen, --batch and --repeat must be positive");
  engine::Runner runner(*model, runner_config(args));
  // Every storage group's K and V of all its layers for one token, in its format.
  const kv::PagedKvCache& cache = runner.cache();
  size_t kv_bytes_per_token = 0;
  std::string kv_formats;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) != g) continue;  // a shared group stores nothing
    kv_bytes_per_token += cache.bytes_per_block(g) / static_cast<size_t>(cache.block_tokens());
    const std::string name = cache.group(g).format.name();
    if (kv_formats.find(name) == std::string::npos)
      kv_formats += (kv_formats.empty() ? "" : ",") + name;
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model->vocab_size() - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(prompt_len));
    for (auto& t : p) t = token(rng);
  }
  engine::GreedyOptions options;
  options.max_new_tokens = gen;
  options.max_rows = static_cast<int>(batch);
  // One warm-up run (page in the weights), then the best of `repeat` timed runs.
  engine::generate_greedy(runner, prompts, options);
  double best_prefill = 0, best_decode = 0;
  for (int64_t r = 0; r < repeat; ++r) {
    const auto result = engine::generate_greedy(runner, prompts, options);
    const double prefill = static_cast<double>(result.prompt_tokens) / result.prefill_seconds;
    // The first generated token of each row comes from its prefill step.
    const double decode =
        static_cast<double>(result.generated_tokens - batch) / result.decode_seconds;
    best_prefill = std::max(best_prefill, prefill);
    best_decode = std::max(best_decode, decode);
  }
  nlohmann::json out = {{"model", args.required("model")},
                        {"model_type", model->config().model_type},
                        {"threads", ThreadPool::global().num_threads()},
                        {"batch", batch},
                        {"prompt_len", prompt_len},
                        {"gen", gen},
                        {"prefill_tok_s", best_prefill},
                        {"decode_tok_s", best_decode},
                        {"kv_format", kv_formats},
                        {"kv_bytes_per_token", kv_bytes_per_token}};
  if (args.has("json")) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "%s threads=%d batch=%lld prompt=%lld gen=%lld kv=%s (%zu bytes/token): prefill %.1f "
        "tok/s, decode %.2f tok/s\n",
        model->config().model_type.c_str(), ThreadPool::global().num_threads(),
        static_cast<long long>(batch), static_cast<long long>(prompt_len),
        static_cast<long long>(gen), kv_formats.c_str(), kv_bytes_per_token, best_prefill,
        best_decode);
  }
  return 0;
}

}  // namespace ringlm::cli
