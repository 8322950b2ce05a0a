// `ringlm generate` with sampling flags runs through the Engine: temperature 0 prints what the
// greedy path prints, a seed reproduces its text, bad values are clear errors.
#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "cli/text_io.h"
#include "engine/runner.h"
#include "models/golden_util.h"
#include "tokenizer/tokenizer.h"

namespace ringlm {
namespace {

using testing::run;

std::string generate(const std::string& flags) {
  const auto out = run("generate --model " + testing::fixture_model_dir("llama3") +
                           " --prompt 'The quick brown fox' --max-tokens 24 " + flags,
                       "", /*stdout_only=*/true);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  return out.output;
}

TEST(GenerateCli, TemperatureZeroPrintsTheGreedyText) {
  EXPECT_EQ(generate("--temperature 0"), generate(""));
}

TEST(GenerateCli, SeedReproducesSampledText) {
  const std::string a = generate("--temperature 1.2 --seed 7");
  EXPECT_EQ(a, generate("--temperature 1.2 --seed 7"));
  EXPECT_NE(a, generate("--temperature 1.2 --seed 8"));
  // n = 3: choice 0 first, then the others, one line each.
  const std::string three = generate("--temperature 1.2 --seed 7 --n 3");
  EXPECT_EQ(three.substr(0, a.size()), a);
  EXPECT_EQ(testing::lines(three).size(), testing::lines(a).size() + 2);
}

// Two turns of `ringlm chat` (the Engine, greedy, the second turn from the prefix cache) against
// generate_greedy on the rendered conversation.
TEST(ChatCli, TwoTurnsEqualGreedyOnTheRenderedConversation) {
  const std::string dir = testing::fixture_model_dir("llama3");
  const Tokenizer tokenizer = Tokenizer::load(dir);
  auto model = models::load_model(dir);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::string want = "> ";
  for (const char* line : {"Hello there", "And again"}) {
    messages.push_back({{"role", "user"}, {"content", line}});
    const auto prompt = cli::encode_chat(tokenizer, messages, nlohmann::ordered_json::object());
    engine::Runner runner(*model, engine::RunnerConfig{});
    engine::GreedyOptions options;
    options.max_new_tokens = 12;
    options.stop_token_ids = cli::stop_tokens(dir, tokenizer);
    const auto result = engine::generate_greedy(runner, {prompt}, options);
    const std::string answer = tokenizer.decode(result.tokens[0], /*skip_special_tokens=*/true);
    want += answer + "\n> ";
    messages.push_back({{"role", "assistant"}, {"content", answer}});
  }
  want += "\n";
  const auto out = run("chat --model " + dir + " --max-tokens 12", "Hello there\nAnd again\n",
                       /*stdout_only=*/true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output, want);
}

TEST(GenerateCli, BadSamplingValuesAreClearErrors) {
  const auto out =
      run("generate --model " + testing::fixture_model_dir("llama3") + " --prompt hi --top-p 0");
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.output.find("top_p must be in (0, 1]"), std::string::npos) << out.output;
  const auto ids = run("generate --model " + testing::fixture_model_dir("llama3") +
                       " --prompt-tokens 1,2 --seed 3");
  EXPECT_NE(ids.exit_code, 0);
  EXPECT_NE(ids.output.find("need --prompt"), std::string::npos) << ids.output;
}

}  // namespace
}  // namespace ringlm
