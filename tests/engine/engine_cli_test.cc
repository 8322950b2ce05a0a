// `ringlm generate` with sampling flags runs through the Engine: temperature 0 prints what the
// greedy path prints, a seed reproduces its text, bad values are clear errors.
#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "models/golden_util.h"

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
