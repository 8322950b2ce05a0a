// ringlm's default models (models/, trained by tools/train from public-domain text) against the
// transformers goldens made with them (tests/fixtures/goldens/NAME.safetensors): logits at every
// prompt position, greedy continuation, tokenizer ids, chat-template prompt and greedy answer; and
// `ringlm chat` on the default model. A model not in models/ yet is skipped; a model in models/
// without its golden fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/cli_util.h"
#include "cli/text_io.h"
#include "engine/runner.h"
#include "models/golden_util.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ringlm {
namespace {

namespace fs = std::filesystem;
using testing::Golden;

const std::vector<std::string>& default_models() {
  static const std::vector<std::string> names = {"ringlm-kjv-llama", "ringlm-kjv-gemma3",
                                                 "ringlm-kjv-draft"};
  return names;
}

std::string model_dir(const std::string& name) {
  return std::string(RINGLM_MODELS_DIR) + "/" + name;
}

bool model_present(const std::string& name) {
  return fs::exists(model_dir(name) + "/config.json");
}

// An I32 tensor of a golden file that golden_util.h does not load (tokenizer and chat ids).
std::vector<int32_t> golden_ids(const std::string& name, const std::string& tensor) {
  io::SafetensorsFile file(testing::golden_path(name));
  const Tensor t = file.get(tensor);
  return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
}

class DefaultModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!model_present(GetParam())) {
      GTEST_SKIP() << "models/" << GetParam() << " is not there yet (tools/train/README.md)";
    }
    ASSERT_TRUE(fs::exists(testing::golden_path(GetParam())))
        << "models/" << GetParam() << " ships without its golden "
        << testing::golden_path(GetParam());
  }
};

TEST_P(DefaultModel, LogitsMatchTransformersAtEveryPosition) {
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(model_dir(GetParam()));
  ASSERT_EQ(model->vocab_size(), golden.vocab);
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.max_step_tokens = static_cast<int64_t>(golden.prompt.size());
  engine::Runner runner(*model, rc);
  auto& cache = runner.cache();
  const auto seq = cache.add_sequence();
  ASSERT_TRUE(cache.reserve(seq, static_cast<int64_t>(golden.prompt.size())));
  ASSERT_TRUE(cache.append(seq, static_cast<int64_t>(golden.prompt.size())));
  std::vector<kv::RowRequest> rows = {{seq, golden.prompt, 0, true, true}};
  kv::StepPlan plan(rows, cache);
  const Tensor logits = runner.step(plan);
  ASSERT_EQ(plan.logits_count(0), static_cast<int64_t>(golden.prompt.size()));
  for (size_t p = 0; p < golden.prompt.size(); ++p) {
    const float* mine = logits.row<float>(plan.logits_begin(0) + static_cast<int64_t>(p));
    const float* theirs = golden.logits.data() + p * static_cast<size_t>(golden.vocab);
    float max_abs = 0, max_diff = 0;
    for (int64_t v = 0; v < golden.vocab; ++v) {
      max_abs = std::max(max_abs, std::fabs(theirs[v]));
      max_diff = std::max(max_diff, std::fabs(theirs[v] - mine[v]));
    }
    ASSERT_LE(max_diff, 1e-4f * max_abs) << GetParam() << " position " << p;
  }
  cache.release(seq);
}

TEST_P(DefaultModel, GreedyContinuationMatchesTransformers) {
  const Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(model_dir(GetParam()));
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{64} << 20;
  rc.max_step_tokens = 48;  // a chunked prefill, chunks not aligned to the sliding window
  engine::Runner runner(*model, rc);
  engine::GreedyOptions options;
  options.max_new_tokens = static_cast<int64_t>(golden.greedy.size());
  const auto result = engine::generate_greedy(runner, {golden.prompt}, options);
  EXPECT_EQ(result.tokens.at(0), golden.greedy) << GetParam();
}

TEST_P(DefaultModel, TokenizerEncodesAsHuggingFace) {
  const Golden golden = testing::load_golden(GetParam());
  const Tokenizer tokenizer = Tokenizer::load(model_dir(GetParam()));
  const std::string text = golden.metadata.at("tokenizer_text");
  const auto ids = golden_ids(GetParam(), "tokenizer_ids");
  EXPECT_EQ(tokenizer.encode(text, /*add_special_tokens=*/true), ids);
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), text);
}

TEST_P(DefaultModel, ChatTemplatePromptAndAnswerMatchTransformers) {
  const Golden golden = testing::load_golden(GetParam());
  const std::string dir = model_dir(GetParam());
  const Tokenizer tokenizer = Tokenizer::load(dir);
  const nlohmann::ordered_json messages = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", golden.metadata.at("chat_user")}}});
  // The template is the one whose renders tests/jinja checks against jinja2 (ringlm_kjv).
  std::ifstream fixture(std::string(RINGLM_FIXTURES_DIR) + "/chat_templates/ringlm_kjv.jinja");
  const std::string fixture_template((std::istreambuf_iterator<char>(fixture)),
                                     std::istreambuf_iterator<char>());
  EXPECT_EQ(tokenizer.chat_template().value_or(""), fixture_template);
  const auto prompt = cli::encode_chat(tokenizer, messages, nlohmann::ordered_json::object());
  EXPECT_EQ(tokenizer.decode(prompt), golden.metadata.at("chat_prompt"));
  ASSERT_EQ(prompt, golden_ids(GetParam(), "chat_prompt_ids"));
  auto model = models::load_model(dir);
  engine::Runner runner(*model, engine::RunnerConfig{});
  engine::GreedyOptions options;
  options.max_new_tokens = std::stoll(golden.metadata.at("chat_max_tokens"));
  options.stop_token_ids = cli::stop_tokens(dir, tokenizer);
  const auto result = engine::generate_greedy(runner, {prompt}, options);
  EXPECT_EQ(result.tokens.at(0), golden_ids(GetParam(), "chat_greedy_ids"));
  EXPECT_EQ(tokenizer.decode(result.tokens.at(0), /*skip_special_tokens=*/true),
            golden.metadata.at("chat_answer"));
}

INSTANTIATE_TEST_SUITE_P(Models, DefaultModel, ::testing::ValuesIn(default_models()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// `ringlm chat` on the default model: the template renders, the answer streams, and it is the
// answer transformers gives to the same question.
TEST(DefaultModelCli, ChatAnswersAsTransformers) {
  const std::string name = "ringlm-kjv-llama";
  if (!model_present(name)) GTEST_SKIP() << "models/" << name << " is not there yet";
  const Golden golden = testing::load_golden(name);
  const std::string answer = golden.metadata.at("chat_answer");
  ASSERT_FALSE(answer.empty());
  const auto out = testing::run(
      "chat --model " + model_dir(name) + " --max-tokens " + golden.metadata.at("chat_max_tokens"),
      golden.metadata.at("chat_user") + "\n", /*stdout_only=*/true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output, "> " + answer + "\n> \n");
}

// The repository's limits on shipped models: every file under 16 MiB, all of models/ under 60 MiB.
TEST(DefaultModelFiles, FitTheRepositoryLimits) {
  const fs::path root(RINGLM_MODELS_DIR);
  if (!fs::exists(root)) GTEST_SKIP() << "no models/ yet";
  uintmax_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_LT(entry.file_size(), uintmax_t{16} << 20) << entry.path();
    total += entry.file_size();
  }
  EXPECT_LT(total, uintmax_t{60} << 20);
}

}  // namespace
}  // namespace ringlm
