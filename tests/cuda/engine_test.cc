// The serving engine on a GPU model. A step copies to the host only the logit rows a choice needs
// whole (sampling, logprobs, bias, penalties, suppressed ids); a plain greedy row gets its token
// from the device's argmax. Oracle: identical prompts in the same steps, one plain greedy (device
// argmax) and one greedy with logprobs (host argmax over the copied row), give the same tokens,
// each the top-1 of the logprobs; sampled requests in the same steps make the copied rows come
// in runs with gaps.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "models/model.h"

namespace ringlm::engine {
namespace {

TEST(GpuEngine, DeviceArgmaxRowsEqualHostArgmaxRows) {
  RINGLM_REQUIRE_GPU();
  auto model = models::load_model(testing::fixture_model_dir("llama3"), Device::CUDA);
  EngineConfig config;
  config.runner.kv_memory_bytes = size_t{8} << 20;
  config.runner.block_tokens = 16;
  config.runner.max_step_tokens = 128;
  config.max_batch = 8;
  Engine engine(*model, testing::fixture_tokenizer(), config);
  testing::Collector collector(engine);
  std::mt19937 rng(5);
  std::vector<size_t> plain, with_logprobs;
  for (size_t n : {30u, 55u}) {
    std::vector<int32_t> prompt(n);
    for (auto& id : prompt) id = static_cast<int32_t>(3 + rng() % 509);
    Request greedy;
    greedy.prompt = prompt;
    greedy.sampling.temperature = 0.0f;
    greedy.stop.max_tokens = 24;
    greedy.stop.ignore_eos = true;
    Request sampled = greedy;
    sampled.sampling.temperature = 0.9f;
    sampled.sampling.seed = 7;
    Request logprobs = greedy;
    logprobs.sampling.want_logprobs = true;
    logprobs.sampling.logprobs = 1;
    plain.push_back(collector.submit(greedy));
    collector.submit(sampled);
    with_logprobs.push_back(collector.submit(logprobs));
  }
  collector.wait_all();
  for (size_t i = 0; i < plain.size(); ++i) {
    const auto& a = collector.result(plain[i]).choices.at(0);
    const auto& b = collector.result(with_logprobs[i]).choices.at(0);
    ASSERT_EQ(a.tokens.size(), 24u);
    ASSERT_EQ(b.tokens.size(), 24u);
    for (size_t t = 0; t < a.tokens.size(); ++t) {
      EXPECT_EQ(a.tokens[t].token, b.tokens[t].token) << "prompt " << i << " token " << t;
      ASSERT_FALSE(b.tokens[t].top.empty());
      EXPECT_EQ(b.tokens[t].top[0].token, b.tokens[t].token) << "prompt " << i << " token " << t;
    }
  }
  engine.drain();
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace ringlm::engine
