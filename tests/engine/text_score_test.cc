// engine::score_tokens and `ringlm perplexity` against transformers: the negative log-likelihood of
// a fixture's golden prompt computed from transformers' logits (goldens) equals ringlm's; KL of a
// run against itself is zero; a coarser KV format has a positive KL and the same NLL to within it.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "engine/text_score.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm {
namespace {

// Σ −log softmax(golden logits[i])[prompt[i+1]], in double.
double golden_nll_sum(const testing::Golden& g) {
  double sum = 0;
  for (size_t i = 0; i + 1 < g.prompt.size(); ++i) {
    const float* row = g.logits.data() + i * static_cast<size_t>(g.vocab);
    double max = -INFINITY;
    for (int64_t v = 0; v < g.vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
    double z = 0;
    for (int64_t v = 0; v < g.vocab; ++v) z += std::exp(row[v] - max);
    sum -= row[g.prompt[i + 1]] - max - std::log(z);
  }
  return sum;
}

engine::RunnerConfig small_config(const char* format, int64_t chunk) {
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.max_step_tokens = chunk;
  rc.kv_format = kv::KvFormat::parse(format);
  return rc;
}

TEST(TextScore, NllEqualsTransformersGoldenAndSelfKlIsZero) {
  for (const char* name : {"llama3", "gemma3", "mistral_sw"}) {
    const testing::Golden golden = testing::load_golden(name);
    auto model = models::load_model(testing::fixture_model_dir(name));
    engine::Runner runner(*model, small_config("f32", 24));  // chunked: 80 tokens in 4 steps
    engine::Runner same(*model, small_config("f32", 80));
    const engine::TextScore score = engine::score_tokens(runner, &same, golden.prompt);
    ASSERT_EQ(score.positions, static_cast<int64_t>(golden.prompt.size()) - 1);
    const double want = golden_nll_sum(golden);
    EXPECT_NEAR(score.nll_sum, want, 1e-4 * std::fabs(want)) << name;
    EXPECT_EQ(score.kl_sum, 0.0) << name << ": chunking changed the logits";
    EXPECT_EQ(score.top1_agree, score.positions) << name;
    EXPECT_EQ(runner.cache().used_blocks(), 0);
    EXPECT_EQ(same.cache().used_blocks(), 0);
  }
}

TEST(TextScore, CoarserKvHasPositiveKlAgainstF32) {
  const testing::Golden golden = testing::load_golden("qwen3");
  auto model = models::load_model(testing::fixture_model_dir("qwen3"));
  engine::Runner f32(*model, small_config("f32", 80));
  engine::Runner f16(*model, small_config("f16", 80));
  const engine::TextScore score = engine::score_tokens(f16, &f32, golden.prompt);
  EXPECT_GT(score.kl_sum, 0.0);
  EXPECT_LT(score.mean_kl(), 1e-4);  // f16 KV rounds to 2^-11: a tiny cost
  EXPECT_NEAR(score.nll_sum, golden_nll_sum(golden), 1e-3 * golden_nll_sum(golden));
}

TEST(PerplexityCli, ReportsTheGoldenPerplexityAndKl) {
  const testing::Golden golden = testing::load_golden("llama3");
  std::string ids;
  for (size_t i = 0; i < golden.prompt.size(); ++i)
    ids += (i ? "," : "") + std::to_string(golden.prompt[i]);
  const auto out = testing::run("perplexity --model " + testing::fixture_model_dir("llama3") +
                                    " --prompt-tokens " + ids +
                                    " --kv-format f32 --reference-kv-format bf16 --json",
                                "", true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  const auto json = nlohmann::json::parse(out.output);
  const double want =
      std::exp(golden_nll_sum(golden) / static_cast<double>(golden.prompt.size() - 1));
  EXPECT_NEAR(json["perplexity"].get<double>(), want, 1e-3 * want);
  EXPECT_GT(json["mean_kl"].get<double>(), 0.0);  // bf16 reference differs from f32
  EXPECT_EQ(json["positions"].get<int64_t>(), static_cast<int64_t>(golden.prompt.size()) - 1);
  const auto bad = testing::run("perplexity --model " + testing::fixture_model_dir("llama3") +
                                " --text-file /nonexistent.jsonl");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("cannot read --text-file"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace ringlm
