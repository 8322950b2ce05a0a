// MLX-quantized checkpoints (tests/fixtures/models/*_mlx) on the GPU: codes, scales and biases
// upload with the model, and the logits match the CPU's forward on the same checkpoint (whole
// prompt: the dequantized-tile path; 3-token chunks: the fused GEMV), the greedy continuation
// equals the CPU's token for token.
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_test_util.h"
#include "engine/runner.h"
#include "models/golden_util.h"
#include "models/model.h"
#include "models/parity_util.h"

namespace ringlm {
namespace {

using testing::Golden;

// The fused GEMV (up to 8 rows: the 3-token chunks) is within f32 rounding of the CPU
// (cuda_ops.h), held to the dense GPU suite's bound. The tile path (the whole prompt) rounds x and
// the dequantized w to the scales' dtype, as a dense model of that dtype does on the GPU: exact
// for F32 scales (llama3_mlx), 2^-11 for F16 (qwen3_mlx), 2^-8 for BF16 (gemma3_mlx); measured
// on the H200: 3.9e-3 (F16) and 1.5e-2 (BF16) of the largest logit.
constexpr float kGemvTolerance = 1e-4f;
float tile_tolerance(const std::string& model) {
  if (model == "gemma3") return 4e-2f;  // BF16 scales
  if (model == "qwen3") return 1e-2f;   // F16 scales
  return kGemvTolerance;                // F32 scales
}

class GpuQuantizedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuQuantizedModel, LogitsMatchTheCpu) {
  RINGLM_REQUIRE_GPU();
  const Golden golden = testing::load_golden(GetParam() + "_mlx_dense");  // for its prompt
  const std::string dir = testing::fixture_model_dir(GetParam() + "_mlx");
  auto gpu = models::load_model(dir, Device::CUDA);
  auto cpu = models::load_model(dir, Device::CPU);
  ASSERT_EQ(gpu->device(), Device::CUDA);
  const auto n = static_cast<int64_t>(golden.prompt.size());
  const auto on_cpu = testing::prompt_logits(*cpu, golden.prompt, n, nullptr);
  for (int64_t chunk : {n, int64_t{3}}) {
    const auto on_gpu = testing::prompt_logits(*gpu, golden.prompt, chunk, nullptr);
    ASSERT_EQ(on_gpu.size(), on_cpu.size());
    EXPECT_LE(testing::worst_relative_error(on_gpu, on_cpu, golden.vocab),
              chunk == n ? tile_tolerance(GetParam()) : kGemvTolerance)
        << GetParam() << " chunk " << chunk;
  }
}

// Greedy tokens equal the CPU's where the prefill's tile path keeps f32 (llama3_mlx) or the
// rounding happens not to flip a near-tie (gemma3_mlx); qwen3_mlx's F16 tile rounding flips its
// 19th token (measured), so it is held to its logits bound above instead.
TEST_P(GpuQuantizedModel, GreedyContinuationEqualsTheCpu) {
  RINGLM_REQUIRE_GPU();
  if (GetParam() == "qwen3") GTEST_SKIP() << "F16 tile rounding flips a near-tie (see above)";
  const Golden golden = testing::load_golden(GetParam() + "_mlx_dense");
  const std::string dir = testing::fixture_model_dir(GetParam() + "_mlx");
  auto gpu = models::load_model(dir, Device::CUDA);
  auto cpu = models::load_model(dir, Device::CPU);
  bool gpu_empty = false, cpu_empty = false;
  const auto on_gpu =
      testing::greedy_continuation(*gpu, golden.prompt, golden.greedy.size(), &gpu_empty);
  const auto on_cpu =
      testing::greedy_continuation(*cpu, golden.prompt, golden.greedy.size(), &cpu_empty);
  EXPECT_EQ(on_gpu, on_cpu) << GetParam();
  EXPECT_TRUE(gpu_empty);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuQuantizedModel,
                         ::testing::Values(std::string("llama3"), std::string("gemma3"),
                                           std::string("qwen3")),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace ringlm
