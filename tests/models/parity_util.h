// Runs prompts through a model step by step for the parity tests (CPU: tests/models, GPU:
// tests/cuda): logits of every prompt position, with any chunking and an optional neighbour row.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/runner.h"
#include "models/model.h"

namespace ringlm::testing {

// Runs the prompt as rows of `chunk`-token prefill steps, optionally beside a second row, and
// returns the logits of every prompt position of the first row. K/V are stored in `kv_format`.
inline std::vector<float> prompt_logits(
    models::Model& model, const std::vector<int32_t>& prompt, int64_t chunk,
    const std::vector<int32_t>* neighbour,
    const kv::KvFormat& kv_format = kv::KvFormat::dense(DType::F32)) {
  engine::RunnerConfig rc;
  rc.kv_format = kv_format;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.block_tokens = 16;
  rc.max_step_tokens = 2 * static_cast<int64_t>(prompt.size()) + 8;
  engine::Runner runner(model, rc);
  auto& cache = runner.cache();
  const auto seq = cache.add_sequence();
  EXPECT_TRUE(cache.reserve(seq, static_cast<int64_t>(prompt.size())));
  kv::SequenceId other = 0;
  if (neighbour != nullptr) {
    other = cache.add_sequence();
    EXPECT_TRUE(cache.reserve(other, static_cast<int64_t>(neighbour->size())));
  }
  std::vector<float> out;
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(chunk)) {
    const size_t end = std::min(prompt.size(), start + static_cast<size_t>(chunk));
    std::vector<kv::RowRequest> rows;
    if (neighbour != nullptr && start < neighbour->size()) {
      // The neighbour runs a different chunking so rows' token ranges never line up.
      const size_t n_end = std::min(neighbour->size(), start + static_cast<size_t>(chunk));
      rows.push_back({other,
                      {neighbour->begin() + static_cast<int64_t>(start),
                       neighbour->begin() + static_cast<int64_t>(n_end)},
                      static_cast<int64_t>(start),
                      true,
                      true});
      EXPECT_TRUE(cache.append(other, static_cast<int64_t>(n_end - start)));
    }
    rows.push_back(
        {seq,
         {prompt.begin() + static_cast<int64_t>(start), prompt.begin() + static_cast<int64_t>(end)},
         static_cast<int64_t>(start),
         true,
         true});
    EXPECT_TRUE(cache.append(seq, static_cast<int64_t>(end - start)));
    kv::StepPlan plan(rows, cache);
    Tensor logits = runner.step(plan);
    const int mine = static_cast<int>(rows.size()) - 1;
    const float* first = logits.row<float>(plan.logits_begin(mine));
    out.insert(out.end(), first, first + plan.logits_count(mine) * model.vocab_size());
  }
  cache.release(seq);
  if (other != 0) cache.release(other);
  EXPECT_EQ(cache.used_blocks(), 0);
  return out;
}

// Runs `prompts` (one length) side by side, one token of each per step: decode steps of
// prompts.size() rows, one query each. Returns every row's logits at every position, position
// by position. K/V are stored in `kv_format`.
inline std::vector<float> lockstep_logits(
    models::Model& model, const std::vector<std::vector<int32_t>>& prompts,
    const kv::KvFormat& kv_format = kv::KvFormat::dense(DType::F32)) {
  engine::RunnerConfig rc;
  rc.kv_format = kv_format;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.block_tokens = 16;
  rc.max_step_tokens = static_cast<int64_t>(prompts.size()) + 8;
  engine::Runner runner(model, rc);
  auto& cache = runner.cache();
  std::vector<kv::SequenceId> seqs;
  for (const auto& prompt : prompts) {
    EXPECT_EQ(prompt.size(), prompts.front().size());
    seqs.push_back(cache.add_sequence());
    EXPECT_TRUE(cache.reserve(seqs.back(), static_cast<int64_t>(prompt.size())));
  }
  std::vector<float> out;
  for (size_t pos = 0; pos < prompts.front().size(); ++pos) {
    std::vector<kv::RowRequest> rows;
    for (size_t i = 0; i < prompts.size(); ++i) {
      rows.push_back({seqs[i], {prompts[i][pos]}, static_cast<int64_t>(pos), true, true});
      EXPECT_TRUE(cache.append(seqs[i], 1));
    }
    kv::StepPlan plan(rows, cache);
    Tensor logits = runner.step(plan);
    const float* first = logits.row<float>(0);
    out.insert(out.end(), first, first + static_cast<int64_t>(prompts.size()) * model.vocab_size());
  }
  for (const auto seq : seqs) cache.release(seq);
  EXPECT_EQ(cache.used_blocks(), 0);
  return out;
}

// Greedy continuation of the golden prompt with a chunked prefill (32-token steps): the generated
// ids, and whether the cache is empty afterwards.
inline std::vector<int32_t> greedy_continuation(models::Model& model,
                                                const std::vector<int32_t>& prompt,
                                                size_t new_tokens, bool* cache_empty) {
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.max_step_tokens = 32;  // forces a chunked prefill
  engine::Runner runner(model, rc);
  engine::GreedyOptions options;
  options.max_new_tokens = static_cast<int64_t>(new_tokens);
  const auto result = engine::generate_greedy(runner, {prompt}, options);
  *cache_empty = runner.cache().used_blocks() == 0;
  return result.tokens.at(0);
}

// max |a - b| over max |b|, per position of `vocab` logits; the worst position.
inline float worst_relative_error(const std::vector<float>& a, const std::vector<float>& b,
                                  int64_t vocab) {
  float worst = 0;
  for (size_t p = 0; p * static_cast<size_t>(vocab) < b.size(); ++p) {
    float max_abs = 0, max_diff = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const size_t i = p * static_cast<size_t>(vocab) + static_cast<size_t>(v);
      max_abs = std::max(max_abs, std::fabs(b[i]));
      max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    }
    worst = std::max(worst, max_diff / std::max(max_abs, 1e-30f));
  }
  return worst;
}

}  // namespace ringlm::testing
