// MLX-quantized checkpoints (tests/fixtures/models/*_mlx, made by tools/quant/mlx_quantize.py):
// ringlm's forward on the quantized model equals its forward on the dequantized dense twin
// (*_mlx_dense, whose weights are exactly dequant(codes) in f32) bit for bit, and the twin matches
// transformers (goldens/*_mlx_dense.safetensors, made on the GPU machine). Loader errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/runner.h"
#include "io/io_test_util.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm {
namespace {

// Logits at every position of `prompt`, prefilled in chunks of `chunk` tokens.
std::vector<float> prompt_logits(models::Model& model, const std::vector<int32_t>& prompt,
                                 int64_t chunk) {
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.max_step_tokens = static_cast<int64_t>(prompt.size()) + 8;
  engine::Runner runner(model, rc);
  auto& cache = runner.cache();
  const auto seq = cache.add_sequence();
  EXPECT_TRUE(cache.reserve(seq, static_cast<int64_t>(prompt.size())));
  std::vector<float> out;
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(chunk)) {
    const size_t end = std::min(prompt.size(), start + static_cast<size_t>(chunk));
    std::vector<kv::RowRequest> rows = {
        {seq,
         {prompt.begin() + static_cast<int64_t>(start), prompt.begin() + static_cast<int64_t>(end)},
         static_cast<int64_t>(start),
         true,
         true}};
    EXPECT_TRUE(cache.append(seq, static_cast<int64_t>(end - start)));
    kv::StepPlan plan(rows, cache);
    const Tensor logits = runner.step(plan);
    const float* first = logits.row<float>(plan.logits_begin(0));
    out.insert(out.end(), first, first + plan.logits_count(0) * model.vocab_size());
  }
  cache.release(seq);
  return out;
}

std::vector<int32_t> test_prompt(int64_t vocab) {
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 48; ++i) prompt.push_back((i * 97 + 13) % static_cast<int32_t>(vocab));
  return prompt;
}

class QuantizedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedModel, ForwardEqualsTheDequantizedDenseTwinBitExactly) {
  auto quantized = models::load_model(testing::fixture_model_dir(GetParam() + "_mlx"));
  auto dense = models::load_model(testing::fixture_model_dir(GetParam() + "_mlx_dense"));
  const auto prompt = test_prompt(quantized->vocab_size());
  // Chunks of more than 4 rows dequantize weight blocks; up to 4 unpack in registers.
  for (int64_t chunk : {int64_t{48}, int64_t{5}, int64_t{3}}) {
    const auto q = prompt_logits(*quantized, prompt, chunk);
    const auto d = prompt_logits(*dense, prompt, chunk);
    ASSERT_EQ(q.size(), d.size());
    for (size_t i = 0; i < q.size(); ++i)
      ASSERT_EQ(q[i], d[i]) << GetParam() << " chunk " << chunk << " index " << i;
  }
}

// The twin against transformers (its goldens are made on the GPU machine: see
// tests/fixtures/README.md), then the quantized model against the same goldens.
TEST_P(QuantizedModel, DequantizedTwinMatchesTransformers) {
  const std::string name = GetParam() + "_mlx_dense";
  if (!std::filesystem::exists(std::string(RINGLM_FIXTURES_DIR) + "/goldens/" + name +
                               ".safetensors"))
    GTEST_SKIP() << "goldens/" << name
                 << ".safetensors is absent: make it with tools/golden/make_model_goldens.py "
                    "--existing (tests/fixtures/README.md)";
  const testing::Golden golden = testing::load_golden(name);
  for (const std::string& dir : {name, GetParam() + "_mlx"}) {
    auto model = models::load_model(testing::fixture_model_dir(dir));
    const auto logits =
        prompt_logits(*model, golden.prompt, static_cast<int64_t>(golden.prompt.size()));
    ASSERT_EQ(logits.size(), golden.logits.size());
    for (size_t p = 0; p < golden.prompt.size(); ++p) {
      float max_abs = 0, max_diff = 0;
      for (int64_t v = 0; v < golden.vocab; ++v) {
        const size_t i = p * static_cast<size_t>(golden.vocab) + static_cast<size_t>(v);
        max_abs = std::max(max_abs, std::fabs(golden.logits[i]));
        max_diff = std::max(max_diff, std::fabs(golden.logits[i] - logits[i]));
      }
      ASSERT_LE(max_diff, 1e-4f * max_abs) << dir << " position " << p;
    }
    engine::RunnerConfig rc;
    rc.kv_memory_bytes = size_t{64} << 20;
    rc.max_step_tokens = 32;
    engine::Runner runner(*model, rc);
    engine::GreedyOptions options;
    options.max_new_tokens = static_cast<int64_t>(golden.greedy.size());
    EXPECT_EQ(engine::generate_greedy(runner, {golden.prompt}, options).tokens.at(0), golden.greedy)
        << dir;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizedModel,
                         ::testing::Values(std::string("llama3"), std::string("gemma3"),
                                           std::string("qwen3")),
                         [](const auto& param_info) { return std::string(param_info.param); });

// A copy of llama3_mlx with config.json's quantization replaced by `quantization` (absent if null).
std::string copy_with_quantization(const io::testing::TempDir& dir,
                                   const nlohmann::json& quantization) {
  const std::string src = testing::fixture_model_dir("llama3_mlx");
  std::filesystem::copy_file(src + "/model.safetensors", dir.file("model.safetensors"));
  std::ifstream in(src + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config.erase("quantization");
  config.erase("quantization_config");
  if (!quantization.is_null()) config["quantization"] = quantization;
  std::ofstream(dir.file("config.json")) << config.dump();
  return dir.path();
}

void expect_load_error(const nlohmann::json& quantization, const std::string& fragment) {
  io::testing::TempDir dir;
  const std::string path = copy_with_quantization(dir, quantization);
  try {
    models::load_model(path);
    ADD_FAILURE() << "loaded with quantization " << quantization.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(QuantizedModelLoad, RefusesCheckpointsItCannotRead) {
  // Scales in the weights but no quantization in the config.
  expect_load_error(nullptr, "config.json has no MLX quantization");
  // Another MLX mode, a transformers method.
  expect_load_error({{"group_size", 32}, {"bits", 4}, {"mode", "mxfp4"}},
                    "quantization 'mxfp4' is not supported");
  expect_load_error({{"quant_method", "gptq"}}, "quantization 'gptq' is not supported");
  // Formats MLX does not have.
  expect_load_error({{"group_size", 16}, {"bits", 4}}, "group_size=16 is not one of");
  expect_load_error({{"group_size", 64}, {"bits", 7}}, "bits=7 is not one of");
  // Bits that do not match the packed codes' width.
  expect_load_error({{"group_size", 64}, {"bits", 8}}, "8-bit codes");
  // An override that says "not quantized" for a module that is.
  expect_load_error({{"group_size", 64},
                     {"bits", 4},
                     {"model.layers.1.mlp.down_proj", {{"group_size", 32}, {"bits", 8}}},
                     {"model.layers.0.self_attn.q_proj", false}},
                    "marks it not quantized");
}

}  // namespace
}  // namespace ringlm
