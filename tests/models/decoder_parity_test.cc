// Every fixture architecture (Llama and Gemma families) against transformers goldens (logits at
// every prompt position, greedy continuation), and the step machinery against itself (chunked,
// batched = serial, bit-exact).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/runner.h"
#include "models/golden_util.h"
#include "models/model.h"
#include "models/parity_util.h"

namespace ringlm {
namespace {

using testing::Golden;

class DecoderParity : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderParity, LogitsMatchTransformersAtEveryPosition) {
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()));
  ASSERT_EQ(model->vocab_size(), golden.vocab);
  const auto logits = testing::prompt_logits(*model, golden.prompt,
                                             static_cast<int64_t>(golden.prompt.size()), nullptr);
  ASSERT_EQ(logits.size(), golden.logits.size());
  const auto positions = golden.prompt.size();
  for (size_t p = 0; p < positions; ++p) {
    float max_abs = 0, max_diff = 0;
    for (int64_t v = 0; v < golden.vocab; ++v) {
      const size_t i = p * static_cast<size_t>(golden.vocab) + static_cast<size_t>(v);
      max_abs = std::max(max_abs, std::fabs(golden.logits[i]));
      max_diff = std::max(max_diff, std::fabs(golden.logits[i] - logits[i]));
    }
    ASSERT_LE(max_diff, 1e-4f * max_abs) << GetParam() << " position " << p;
  }
}

TEST_P(DecoderParity, GreedyContinuationMatchesTransformers) {
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()));
  bool cache_empty = false;
  EXPECT_EQ(testing::greedy_continuation(*model, golden.prompt, golden.greedy.size(), &cache_empty),
            golden.greedy);
  EXPECT_TRUE(cache_empty);
}

TEST_P(DecoderParity, ChunkedAndBatchedPrefillEqualsSerialBitExactly) {
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()));
  const auto whole = testing::prompt_logits(*model, golden.prompt,
                                            static_cast<int64_t>(golden.prompt.size()), nullptr);
  std::vector<int32_t> neighbour(golden.prompt.rbegin(), golden.prompt.rend());
  neighbour.resize(neighbour.size() / 2 + 3);
  for (int64_t chunk : {1, 7, 16, 33}) {
    const auto chunked = testing::prompt_logits(*model, golden.prompt, chunk, &neighbour);
    ASSERT_EQ(chunked.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_EQ(chunked[i], whole[i]) << GetParam() << " chunk " << chunk << " index " << i;
    }
  }
}

TEST_P(DecoderParity, ManyPromptsBatchedGiveEachItsSerialTokens) {
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()));
  std::vector<std::vector<int32_t>> prompts;
  for (size_t n : {golden.prompt.size(), size_t{5}, size_t{23}, size_t{1}}) {
    prompts.emplace_back(golden.prompt.begin(), golden.prompt.begin() + static_cast<int64_t>(n));
  }
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.max_step_tokens = 24;
  engine::GreedyOptions options;
  options.max_new_tokens = 12;
  options.max_rows = 3;  // the fourth prompt joins when the first row leaves
  engine::Runner batched_runner(*model, rc);
  const auto batched = engine::generate_greedy(batched_runner, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::Runner alone_runner(*model, rc);
    const auto alone = engine::generate_greedy(alone_runner, {prompts[i]}, options);
    EXPECT_EQ(batched.tokens[i], alone.tokens[0]) << "prompt " << i;
  }
  EXPECT_EQ(std::vector<int32_t>(golden.greedy.begin(), golden.greedy.begin() + 12),
            batched.tokens[0]);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderParity, ::testing::ValuesIn(testing::all_fixtures()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace ringlm
