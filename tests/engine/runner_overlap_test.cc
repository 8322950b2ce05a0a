// Runner::launch/collect on a CPU model: steps launched before the last is collected (the caller
// writes the fed tokens into the plan, as the engine does; or, emulating a GPU's outputs, the
// runner feeds them from the last step's ids) decode the same tokens as one step at a time, on
// full and sliding layouts; the contract's misuse is a clear error. The GPU side (tokens fed on
// the device, from the argmax or device samples) is in tests/cuda/engine_test.cc.
#include <gtest/gtest.h>

#include <random>

#include "engine/runner_overlap_util.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm::engine {
namespace {

RunnerConfig small_runner() {
  RunnerConfig c;
  c.kv_memory_bytes = size_t{8} << 20;
  c.max_step_tokens = 128;
  return c;
}

std::vector<std::vector<int32_t>> prompts(size_t rows) {
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> out(rows);
  for (size_t r = 0; r < rows; ++r) {
    out[r].resize(5 + 7 * r);
    for (auto& id : out[r]) id = static_cast<int32_t>(3 + rng() % 509);
  }
  return out;
}

TEST(RunnerOverlap, LaunchedAheadDecodesAsOneStepAtATime) {
  for (const char* fixture : {"llama3", "mistral_sw"}) {
    auto model = models::load_model(testing::fixture_model_dir(fixture));
    Runner runner(*model, small_runner());
    testing::OverlapDecode d;
    d.steps = 20;  // mistral_sw's window is shorter: the rings wrap
    const auto one_at_a_time = testing::runner_decode(runner, prompts(3), d);
    d.overlap = true;
    const auto overlapped = testing::runner_decode(runner, prompts(3), d);
    EXPECT_EQ(overlapped, one_at_a_time) << fixture;
    EXPECT_EQ(one_at_a_time[0].size(), 21u);
    EXPECT_EQ(runner.launched(), 0);
  }
}

// A CPU runner emulating a GPU's outputs: the fed tokens come from the previous step's argmax or
// device samples through Runner::Feed alone (nothing is written into the plan).
TEST(RunnerOverlap, FeedsOfEmulatedDeviceOutputs) {
  auto model = models::load_model(testing::fixture_model_dir("llama3"));
  RunnerConfig config = small_runner();
  config.emulate_device_outputs = true;
  Runner runner(*model, config);
  for (const float temperature : {0.0f, 1.5f}) {
    testing::OverlapDecode d;
    d.steps = 16;
    d.temperature = temperature;
    const auto one_at_a_time = testing::runner_decode(runner, prompts(4), d);
    d.overlap = true;
    EXPECT_EQ(testing::runner_decode(runner, prompts(4), d), one_at_a_time)
        << "temperature " << temperature;
  }
}

TEST(RunnerOverlap, MisuseIsAClearError) {
  auto model = models::load_model(testing::fixture_model_dir("llama3"));
  Runner runner(*model, small_runner());
  EXPECT_THROW(runner.collect(), Error);
  kv::PagedKvCache& cache = runner.cache();
  std::vector<kv::StepPlan*> plans;
  std::vector<std::unique_ptr<kv::StepPlan>> owned;
  for (int i = 0; i < 3; ++i) {
    const kv::SequenceId seq = cache.add_sequence();
    ASSERT_TRUE(cache.append(seq, 4));
    owned.push_back(std::make_unique<kv::StepPlan>(
        std::vector<kv::RowRequest>{{seq, {5, 6, 7, 8}, 0, false, true}}, cache));
  }
  const std::vector<char> host_row = {1};
  runner.launch(*owned[0], host_row);
  runner.launch(*owned[1], host_row);
  EXPECT_THROW(runner.launch(*owned[2], host_row), Error);  // two are out already
  EXPECT_THROW(runner.step_select(*owned[2], host_row), Error);
  const std::vector<char> two_flags = {1, 1};
  runner.collect();
  EXPECT_THROW(runner.launch(*owned[2], two_flags), Error);  // one flag per logit row
  runner.collect();
  EXPECT_EQ(runner.launched(), 0);
  EXPECT_THROW(owned[0]->set_token(4, 1), Error);
}

}  // namespace
}  // namespace ringlm::engine
