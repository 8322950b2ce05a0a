// The KV budget a runner takes (RunnerConfig::kv_memory_auto): on a GPU what
// gpu_memory_utilization of its memory leaves after the runner's other buffers
// (engine::auto_kv_budget, the arithmetic checked here on made-up memory figures); on the CPU the
// fixed kv_memory_bytes whatever kv_memory_auto says. The GPU side runs in
// tests/cuda/engine_test.cc.
#include <gtest/gtest.h>

#include "engine/runner.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm::engine {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

TEST(AutoKvBudget, IsTheAllowedShareLessWhatIsInUse) {
  // 140 GiB GPU, 40 GiB in use: 0.9 allows 126, so 86 are left for K/V.
  EXPECT_NEAR(static_cast<double>(auto_kv_budget({100 * kGiB, 140 * kGiB}, 0.9)),
              0.9 * static_cast<double>(140 * kGiB) - static_cast<double>(40 * kGiB), 2.0);
  // All of it: exactly what is free.
  EXPECT_EQ(auto_kv_budget({100 * kGiB, 140 * kGiB}, 1.0), 100 * kGiB);
  // More in use than the share allows: nothing (the runner then refuses with a clear error).
  EXPECT_EQ(auto_kv_budget({10 * kGiB, 140 * kGiB}, 0.5), 0u);
  EXPECT_EQ(auto_kv_budget({70 * kGiB, 140 * kGiB}, 0.5), 0u);
}

TEST(AutoKvBudget, CpuRunnersKeepTheFixedBudget) {
  auto model = models::load_model(testing::fixture_model_dir("llama3"), Device::CPU);
  RunnerConfig config;
  config.kv_memory_bytes = size_t{8} << 20;
  config.kv_memory_auto = true;
  config.gpu_memory_utilization = 0.5;
  Runner runner(*model, config);
  EXPECT_EQ(runner.config().kv_memory_bytes, size_t{8} << 20);
}

}  // namespace
}  // namespace ringlm::engine
