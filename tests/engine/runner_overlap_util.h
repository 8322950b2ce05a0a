// Decoding through Runner::launch/collect with each step launched before the last is collected
// (its tokens fed from the device, or written into the plan on a CPU model), against one step
// at a time: shared by the CPU suite (runner_overlap_test.cc) and the GPU suite
// (tests/cuda/engine_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/runner.h"
#include "ops/ops.h"

namespace ringlm::testing {

struct OverlapDecode {
  int steps = 12;
  bool overlap = false;
  // Device outputs: every row sampled on the device with this temperature (0: the argmax).
  float temperature = 0.0f;
};

// The prompts' prefill, then `steps` decode steps of every row; the tokens chosen per row.
inline std::vector<std::vector<int32_t>> runner_decode(
    engine::Runner& runner, const std::vector<std::vector<int32_t>>& prompts,
    const OverlapDecode& d) {
  kv::PagedKvCache& cache = runner.cache();
  const size_t rows = prompts.size();
  std::vector<kv::SequenceId> seqs;
  std::vector<kv::RowRequest> prefill;
  for (const auto& p : prompts) {
    seqs.push_back(cache.add_sequence());
    EXPECT_TRUE(cache.append(seqs.back(), static_cast<int64_t>(p.size())));
    prefill.push_back({seqs.back(), p, 0, false, true});
  }
  // GPU models (or CPU ones emulating them) return ids and take feeds; plain CPU models return
  // logits, and the fed tokens are written into the plan.
  const bool device = runner.device_outputs();
  std::vector<engine::Runner::DeviceSample> samples;
  if (device && d.temperature > 0.0f) {
    for (size_t r = 0; r < rows; ++r)
      samples.push_back({static_cast<int64_t>(r), d.temperature, 1.0f, 0.0f, 0,
                         0.1 + 0.8 * static_cast<double>(r) / static_cast<double>(rows)});
  }
  std::vector<engine::Runner::Feed> feeds;
  for (size_t r = 0; r < rows; ++r) {
    const int32_t source = samples.empty() ? static_cast<int32_t>(r)
                                           : engine::Runner::kFedSample + static_cast<int32_t>(r);
    feeds.push_back({static_cast<int32_t>(r), source});
  }
  const std::vector<char> no_host_rows(rows, 0);
  std::vector<std::vector<int32_t>> out(rows);
  std::vector<int32_t> next(rows, 0);
  const auto take = [&](kv::StepPlan* fed_plan) {
    const engine::Runner::Selected s = runner.collect();
    if (!samples.empty()) {
      next = s.sampled;
    } else if (!s.argmax.empty()) {
      next = s.argmax;
    } else {
      Tensor ids(next.data(), DType::I32, {static_cast<int64_t>(rows)});
      ops::argmax(s.logits, ids);
    }
    for (size_t r = 0; r < rows; ++r) {
      out[r].push_back(next[r]);
      if (fed_plan != nullptr && !device) fed_plan->set_token(static_cast<int64_t>(r), next[r]);
    }
  };
  std::unique_ptr<kv::StepPlan> plans[2];
  plans[0] = std::make_unique<kv::StepPlan>(prefill, cache);
  runner.launch(*plans[0], no_host_rows, samples);
  if (!d.overlap) take(nullptr);
  for (int step = 0; step < d.steps; ++step) {
    std::vector<kv::RowRequest> decode;
    for (size_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(cache.append(seqs[r], 1));
      const auto position = static_cast<int64_t>(prompts[r].size()) + step;
      // Overlapped: a wrong id that the feed (or set_token) must replace.
      decode.push_back({seqs[r], {d.overlap ? 0 : next[r]}, position, false, true});
    }
    auto& plan = plans[(step + 1) % 2];
    plan = std::make_unique<kv::StepPlan>(decode, cache);
    runner.launch(*plan, no_host_rows, samples,
                  d.overlap ? std::span<const engine::Runner::Feed>(feeds)
                            : std::span<const engine::Runner::Feed>());
    take(d.overlap ? plan.get() : nullptr);
  }
  if (d.overlap) take(nullptr);
  for (kv::SequenceId s : seqs) cache.release(s);
  return out;
}

}  // namespace ringlm::testing
