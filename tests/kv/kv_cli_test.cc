// The KV flags of the ringlm binary: --max-kv-size / --kv-keep / --kv-format give the tokens the
// runner gives in process with the same configuration; bad values are one clear error, exit 1.
#include <gtest/gtest.h>

#include "cli/cli_util.h"

#include "engine/runner.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm {
namespace {

using testing::Outcome;

// stdout, and stderr too unless `quiet`.
Outcome run(const std::string& args, bool quiet = false) {
  return testing::run(args, "", quiet);
}

TEST(KvCli, MaxKvSizeGenerateEqualsTheRunner) {
  const std::string fixture = "llama3";
  const testing::Golden golden = testing::load_golden(fixture);
  auto model = models::load_model(testing::fixture_model_dir(fixture));
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.max_kv_size = 12;
  rc.kv_keep = 2;
  rc.kv_format = kv::KvFormat::dense(DType::BF16);
  engine::Runner runner(*model, rc);
  engine::GreedyOptions options;
  options.max_new_tokens = 24;
  const auto want = engine::generate_greedy(runner, {golden.prompt}, options).tokens[0];
  std::string prompt, expected;
  for (size_t i = 0; i < golden.prompt.size(); ++i)
    prompt += (i ? "," : "") + std::to_string(golden.prompt[i]);
  for (size_t i = 0; i < want.size(); ++i) expected += (i ? "," : "") + std::to_string(want[i]);
  const Outcome out =
      run("generate --model " + testing::fixture_model_dir(fixture) + " --prompt-tokens " + prompt +
              " --max-tokens 24 --kv-memory 16 --max-kv-size 12 --kv-keep 2 "
              "--kv-format bf16",
          true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output.substr(0, out.output.find('\n')), expected);
  // And bounding the cache changed the tokens (the flag is not ignored).
  EXPECT_NE(std::vector<int32_t>(golden.greedy.begin(), golden.greedy.begin() + 24), want);
}

TEST(KvCli, BadKvFlagsAreClearErrors) {
  const std::string base =
      "generate --model " + testing::fixture_model_dir("llama3") + " --prompt-tokens 1,2,3 ";
  Outcome out = run(base + "--max-kv-size 4 --kv-keep 4");
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("--max-kv-size 4 must exceed --kv-keep 4"), std::string::npos)
      << out.output;
  out = run(base + "--kv-format int3");
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("unknown KV format 'int3'"), std::string::npos) << out.output;
}

}  // namespace
}  // namespace ringlm
