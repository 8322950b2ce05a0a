// --kv-quant-start S on the GPU: a bf16 companion group answers the queries before S, the
// quantized group those from S on — attention over narrowed query ranges, the TurboQuant
// un-rotation of only the quantized range's rows. Oracles: the GPU's own bf16 run for the
// positions before S (bitwise: the same kernels over the same K/V, and each query's attention
// depends only on its own keys), the CPU's run with the same S for every position (as close as
// the plain quantized format's GPU and CPU runs are), and differing from both plain runs after S
// (the transition happened).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "engine/runner.h"
#include "kv/kv_run_util.h"
#include "kv/kv_test_models.h"
#include "models/model.h"
#include "models/parity_util.h"

namespace ringlm {
namespace {

using testing::Logits;
using testing::run_chunks;
using testing::same_logits;

engine::RunnerConfig config(const std::string& format, int64_t quant_start) {
  engine::RunnerConfig rc;
  rc.kv_format = kv::KvFormat::parse(format);
  rc.kv_quant_start = quant_start;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.block_tokens = 8;
  rc.max_step_tokens = 96;
  return rc;
}

std::vector<float> flat(const Logits& logits) {
  std::vector<float> out;
  for (const auto& row : logits) out.insert(out.end(), row.begin(), row.end());
  return out;
}

TEST(GpuKvQuantStart, BeforeSIsBf16AndEveryPositionMatchesTheCpu) {
  RINGLM_REQUIRE_GPU();
  struct Case {
    std::string fixture, format;
  };
  // head_dim 16/32 fixtures (CUDA-core kernels) and a head_dim-64 model (tensor-core prefill and
  // decode, the f16x2 TurboQuant decoder).
  for (const Case& c : {Case{"llama_linear", "int8-g32"}, Case{"gemma3", "turbo"},
                        Case{"random_d64", "turbo"}, Case{"random_d64", "int4-g32"}}) {
    SCOPED_TRACE(c.fixture + " " + c.format);
    auto gpu = models::load_model(testing::kv_model_dir(c.fixture), Device::CUDA);
    auto cpu = models::load_model(testing::kv_model_dir(c.fixture), Device::CPU);
    const auto prompt = testing::kv_model_prompt(c.fixture);
    std::vector<int32_t> tokens;
    for (size_t i = 0; tokens.size() < 60; ++i)
      tokens.push_back(prompt[(i * 7 + 3) % prompt.size()]);
    const int64_t S = 24;
    // Chunks of 7 (S inside a chunk), then the same as a prefill of 20 and decode steps.
    for (const std::vector<size_t>& chunks : {std::vector<size_t>{7}, std::vector<size_t>{20, 1}}) {
      const Logits with_s = run_chunks(*gpu, config(c.format, S), tokens, chunks);
      const Logits bf16 = run_chunks(*gpu, config("bf16", -1), tokens, chunks);
      const Logits quantized = run_chunks(*gpu, config(c.format, -1), tokens, chunks);
      const Logits on_cpu = run_chunks(*cpu, config(c.format, S), tokens, chunks);
      const Logits quantized_on_cpu = run_chunks(*cpu, config(c.format, -1), tokens, chunks);
      ASSERT_EQ(with_s.size(), tokens.size());
      bool differs_bf16 = false, differs_quantized = false;
      for (size_t p = 0; p < with_s.size(); ++p) {
        if (p < static_cast<size_t>(S)) {
          ASSERT_TRUE(same_logits(with_s[p], bf16[p])) << "position " << p;
          continue;
        }
        differs_bf16 = differs_bf16 || !same_logits(with_s[p], bf16[p]);
        differs_quantized = differs_quantized || !same_logits(with_s[p], quantized[p]);
      }
      EXPECT_TRUE(differs_bf16);
      EXPECT_TRUE(differs_quantized);
      // The GPU agrees with the CPU as well as it does for the plain quantized format: K/V
      // quantized from GEMM outputs that differ in the last bits can land on a neighbouring
      // code (int4: a step of 1/15 of the group's range), which bf16's 2e-2 does not cover.
      const float plain_error =
          testing::worst_relative_error(flat(quantized), flat(quantized_on_cpu), gpu->vocab_size());
      EXPECT_LE(testing::worst_relative_error(flat(with_s), flat(on_cpu), gpu->vocab_size()),
                std::max(2e-2f, 1.5f * plain_error))
          << "plain format's error " << plain_error;
    }
  }
}

}  // namespace
}  // namespace ringlm
