// The serving engine on a GPU model. A step copies to the host only the logit rows a choice needs
// whole (sampling, logprobs, bias, penalties, suppressed ids); a plain greedy row gets its token
// from the device's argmax. Oracle: identical prompts in the same steps, one plain greedy (device
// argmax) and one greedy with logprobs (host argmax over the copied row), give the same tokens,
// each the top-1 of the logprobs; sampled requests in the same steps make the copied rows come
// in runs with gaps. Sampled choices, and greedy ones that want the token's logprob: the device
// sampler's tokens and logprobs equal the host sampler's. Steps launched before the last is
// collected (tokens fed on the device from its argmax or its samples) decode what one step at a
// time does, through the runner and through the engine (stops found a step late).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/runner_overlap_util.h"
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

// Choices that sample with temperature / top_k / top_p / min_p, or are greedy and want the
// chosen token's logprob, take their tokens (and logprobs) from the device sampler
// (cuda::sample); the same requests on an engine with device_sampling off take them from the
// host sampler. Same seeds, so the same uniforms: the tokens must agree (the two differ only when
// u lands within rounding of a CDF boundary, ~1e-15 per token) and the logprobs within float
// rounding of two summation orders. n = 2 puts two choices on the first step's row; a request
// with a repetition penalty in the same steps stays on the host, so host rows and device samples
// mix.
TEST(GpuEngine, DeviceSamplingEqualsHostSampling) {
  RINGLM_REQUIRE_GPU();
  auto model = models::load_model(testing::fixture_model_dir("llama3"), Device::CUDA);
  struct Sampled {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;  // where the request wants them
  };
  std::vector<std::vector<Sampled>> runs(2);  // [engine][request · choice]
  for (int device_sampling = 0; device_sampling < 2; ++device_sampling) {
    EngineConfig config;
    config.runner.kv_memory_bytes = size_t{8} << 20;
    config.runner.block_tokens = 16;
    config.runner.max_step_tokens = 128;
    config.runner.device_sampling = device_sampling == 1;
    config.max_batch = 8;
    Engine engine(*model, testing::fixture_tokenizer(), config);
    testing::Collector collector(engine);
    std::mt19937 rng(11);
    std::vector<RequestId> ids;
    for (int i = 0; i < 6; ++i) {
      Request r;
      r.prompt.resize(static_cast<size_t>(20 + 9 * i));
      for (auto& id : r.prompt) id = static_cast<int32_t>(3 + rng() % 509);
      r.sampling.temperature = i == 4 ? 0.0f : 0.6f + 0.3f * static_cast<float>(i);
      r.sampling.top_k = i == 1 ? 40 : 0;
      r.sampling.top_p = i == 2 || i == 5 ? 0.9f : 1.0f;
      r.sampling.min_p = i == 3 ? 0.05f : 0.0f;
      r.sampling.repetition_penalty = i == 3 ? 1.1f : 1.0f;  // host
      r.sampling.want_logprobs = i == 4 || i == 5;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
      r.n = i == 0 ? 2 : 1;
      r.stop.max_tokens = 20;
      r.stop.ignore_eos = true;
      ids.push_back(collector.submit(r));
    }
    collector.wait_all();
    for (RequestId id : ids) {
      for (const auto& choice : collector.result(id).choices) {
        Sampled got;
        for (const auto& info : choice.tokens) {
          got.tokens.push_back(info.token);
          got.logprobs.push_back(info.logprob);
        }
        ASSERT_EQ(got.tokens.size(), 20u);
        runs[static_cast<size_t>(device_sampling)].push_back(got);
      }
    }
    engine.drain();
    EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  }
  ASSERT_EQ(runs[0].size(), 7u);
  for (size_t c = 0; c < runs[0].size(); ++c) {
    EXPECT_EQ(runs[0][c].tokens, runs[1][c].tokens) << "choice " << c;
    if (c < 5) continue;  // choices 5 and 6 (requests 4 and 5) want logprobs
    for (size_t t = 0; t < runs[0][c].logprobs.size(); ++t) {
      const float host = runs[0][c].logprobs[t], device = runs[1][c].logprobs[t];
      EXPECT_LT(host, 0.0f);
      EXPECT_NEAR(device, host, 1e-5f * (1.0f - host)) << "choice " << c << " token " << t;
    }
  }
}

TEST(GpuEngine, FedStepsDecodeAsOneStepAtATime) {
  RINGLM_REQUIRE_GPU();
  auto model = models::load_model(testing::fixture_model_dir("llama3"), Device::CUDA);
  RunnerConfig config;
  config.kv_memory_bytes = size_t{8} << 20;
  config.max_step_tokens = 128;
  Runner runner(*model, config);
  std::mt19937 rng(4);
  std::vector<std::vector<int32_t>> prompts(5);
  for (size_t r = 0; r < prompts.size(); ++r) {
    prompts[r].resize(4 + 9 * r);
    for (auto& id : prompts[r]) id = static_cast<int32_t>(3 + rng() % 509);
  }
  for (const float temperature : {0.0f, 0.8f}) {  // fed from the argmax, then from samples
    testing::OverlapDecode d;
    d.steps = 16;
    d.temperature = temperature;
    const auto one_at_a_time = testing::runner_decode(runner, prompts, d);
    const int64_t replays = runner.graph_replays();
    d.overlap = true;
    const auto fed = testing::runner_decode(runner, prompts, d);
    EXPECT_EQ(fed, one_at_a_time) << "temperature " << temperature;
    EXPECT_GT(runner.graph_replays(), replays) << "no fed step replayed a CUDA graph";
    EXPECT_EQ(one_at_a_time[0].size(), 17u);
  }
}

// Plain greedy (fed from the argmax), device-sampled with logprobs (fed from the samples),
// host-sampled (a penalty: those steps wait), n = 2, stop strings, stop ids and EOS.
TEST(GpuEngine, OverlappedStepsEqualOneAtATime) {
  RINGLM_REQUIRE_GPU();
  auto model = models::load_model(testing::fixture_model_dir("llama3"), Device::CUDA);
  std::vector<std::vector<testing::RequestResult>> runs;
  for (const bool overlap : {false, true}) {
    EngineConfig config;
    config.runner.kv_memory_bytes = size_t{8} << 20;
    config.runner.block_tokens = 16;
    config.runner.max_step_tokens = 128;
    config.max_batch = 8;
    config.overlap_steps = overlap;
    Engine engine(*model, testing::fixture_tokenizer(), config);
    testing::Collector collector(engine);
    std::mt19937 rng(12);
    for (int i = 0; i < 10; ++i) {
      Request r;
      r.prompt.resize(static_cast<size_t>(10 + 7 * i));
      for (auto& id : r.prompt) id = static_cast<int32_t>(3 + rng() % 509);
      r.sampling.temperature = i % 3 == 0 ? 0.0f : 0.7f;
      r.sampling.want_logprobs = i % 3 == 1;
      r.sampling.repetition_penalty = i == 5 ? 1.1f : 1.0f;
      r.sampling.seed = 50 + static_cast<uint64_t>(i);
      r.n = i == 4 ? 2 : 1;
      r.stop.max_tokens = 8 + 3 * i;
      r.stop.ignore_eos = i % 2 == 0;
      if (i % 4 == 1) r.stop.stop_strings = {"e", "o"};
      if (i % 4 == 3) r.stop.stop_token_ids = {static_cast<int32_t>(3 + rng() % 40)};
      collector.submit(r);
    }
    collector.wait_all();
    runs.emplace_back();
    for (size_t i = 0; i < 10; ++i) runs.back().push_back(collector.result(i));
    engine.drain();
    EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  }
  for (size_t i = 0; i < runs[0].size(); ++i) {
    ASSERT_EQ(runs[0][i].choices.size(), runs[1][i].choices.size());
    for (size_t c = 0; c < runs[0][i].choices.size(); ++c) {
      const auto& a = runs[0][i].choices[c];
      const auto& b = runs[1][i].choices[c];
      ASSERT_EQ(a.tokens.size(), b.tokens.size()) << "request " << i << " choice " << c;
      for (size_t t = 0; t < a.tokens.size(); ++t) {
        EXPECT_EQ(a.tokens[t].token, b.tokens[t].token) << "request " << i << " token " << t;
        EXPECT_NEAR(a.tokens[t].logprob, b.tokens[t].logprob, 1e-5f * (1.0f - a.tokens[t].logprob));
      }
      EXPECT_EQ(a.text, b.text) << "request " << i;
      EXPECT_EQ(a.finish, b.finish) << "request " << i;
      EXPECT_EQ(b.events_after_finish, 0);
    }
    EXPECT_EQ(runs[0][i].usage.completion_tokens, runs[1][i].usage.completion_tokens);
  }
}

// Without a fixed budget a GPU runner's KV cache takes what gpu_memory_utilization of the GPU
// leaves after the weights and the runner's other buffers; too small a share is a clear error.
TEST(GpuEngine, AutoKvBudgetFollowsTheUtilization) {
  RINGLM_REQUIRE_GPU();
  auto model = models::load_model(testing::fixture_model_dir("llama3"), Device::CUDA);
  const MemoryInfo before = memory_info(Device::CUDA);
  RunnerConfig config;
  config.kv_memory_auto = true;
  config.gpu_memory_utilization = 0.2;
  {
    Runner runner(*model, config);
    const size_t budget = runner.config().kv_memory_bytes;
    // At most the share less what was in use before the runner; the runner's own buffers for
    // this tiny model are a few MiB.
    EXPECT_LE(budget, auto_kv_budget(before, 0.2));
    EXPECT_GE(budget + (size_t{64} << 20), auto_kv_budget(before, 0.2));
    EXPECT_GT(budget, size_t{512} << 20);  // more than the fixed default
  }
  config.gpu_memory_utilization =
      static_cast<double>(before.total - before.free) / static_cast<double>(before.total) / 2;
  try {
    Runner runner(*model, config);
    ADD_FAILURE() << "a share below what is in use must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-memory-utilization"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ringlm::engine
