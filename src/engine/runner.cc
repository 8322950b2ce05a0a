#include "engine/runner.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include "engine/scheduler.h"
#include "ops/ops.h"

namespace ringlm::engine {

kv::KvCacheConfig kv_cache_config(const models::Model& model, const RunnerConfig& config) {
  kv::KvCacheConfig kv;
  kv.layers = model.kv_layers();
  for (auto& layer : kv.layers) layer.format = config.kv_format;
  if (config.max_kv_size > 0)
    kv.layers = kv::apply_max_kv_size(std::move(kv.layers), config.max_kv_size, config.kv_keep);
  kv.block_tokens = config.block_tokens;
  kv.memory_bytes = config.kv_memory_bytes;
  kv.max_sequences = config.max_sequences;
  kv.max_step_tokens = config.max_step_tokens;
  kv.lookahead = config.lookahead;
  return kv;
}

Runner::Runner(models::Model& model, const RunnerConfig& config) : model_(model), config_(config) {
  cache_ = std::make_unique<kv::PagedKvCache>(kv_cache_config(model, config));
  arena_ = std::make_unique<Arena>(
      model.activation_bytes(config.max_step_tokens, config.max_step_tokens));
  logits_.resize(static_cast<size_t>(config.max_step_tokens * model.vocab_size()));
}

Tensor Runner::step(const kv::StepPlan& plan) {
  RINGLM_CHECK(plan.num_tokens() <= config_.max_step_tokens, "step of ", plan.num_tokens(),
               " tokens exceeds max_step_tokens ", config_.max_step_tokens);
  const auto wanted = static_cast<int64_t>(plan.logit_tokens().size());
  Tensor logits(logits_.data(), DType::F32, {wanted, model_.vocab_size()});
  model_.forward(plan, *cache_, *arena_, logits);
  return logits;
}

GreedyResult generate_greedy(Runner& runner, const std::vector<std::vector<int32_t>>& prompts,
                             const GreedyOptions& options) {
  RINGLM_USER_CHECK(options.max_new_tokens >= 1, "max_new_tokens must be at least 1");
  GreedyResult result;
  result.tokens.resize(prompts.size());
  const int64_t budget = runner.config().max_step_tokens;
  Scheduler scheduler(runner.cache(),
                      {budget, static_cast<int>(std::min<int64_t>(options.max_rows, budget))});
  std::vector<SeqState> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    RINGLM_USER_CHECK(!prompts[i].empty(), "prompt ", i, " is empty");
    seqs[i].order = i;
    seqs[i].tokens = prompts[i];
    seqs[i].prompt_len = static_cast<int64_t>(prompts[i].size());
    scheduler.enqueue(&seqs[i]);
    result.prompt_tokens += seqs[i].prompt_len;
  }
  while (!scheduler.idle()) {
    const ScheduledStep step = scheduler.schedule();
    if (!step.failed.empty()) {
      const size_t i = step.failed.front()->order;
      RINGLM_USER_CHECK(false, "prompt ", i, " needs ",
                        static_cast<int64_t>(prompts[i].size()) + options.max_new_tokens,
                        " tokens of KV but the cache cannot hold them");
    }
    if (step.empty()) continue;
    const auto start = std::chrono::steady_clock::now();
    kv::StepPlan plan(step.rows, runner.cache());
    Tensor logits = runner.step(plan);
    std::vector<int32_t> next(static_cast<size_t>(logits.size(0)));
    Tensor next_ids(next.data(), DType::I32, {logits.size(0)});
    ops::argmax(logits, next_ids);
    scheduler.complete(step);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool has_prefill = false;
    for (const auto& row : step.rows) has_prefill |= row.tokens.size() > 1 || !row.want_logits;
    (has_prefill ? result.prefill_seconds : result.decode_seconds) += seconds;
    ++result.steps;
    // Finished rows leave and free their KV at once.
    for (size_t r = 0; r < step.rows.size(); ++r) {
      if (plan.logits_count(static_cast<int>(r)) == 0) continue;
      SeqState* seq = step.seqs[r];
      const int32_t token = next[static_cast<size_t>(plan.logits_begin(static_cast<int>(r)))];
      auto& out = result.tokens[seq->order];
      out.push_back(token);
      seq->tokens.push_back(token);
      ++result.generated_tokens;
      if (options.on_token) options.on_token(seq->order, token);
      const bool stop = std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(),
                                  token) != options.stop_token_ids.end();
      if (stop || static_cast<int64_t>(out.size()) >= options.max_new_tokens) scheduler.remove(seq);
    }
  }
  return result;
}

}  // namespace ringlm::engine
