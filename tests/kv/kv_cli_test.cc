// The KV flags of the ringlm binary: --max-kv-size / --kv-keep / --kv-format (dense and affine) /
// --kv-config / --kv-quant-start give the tokens the runner gives in process with the same
// configuration; bad values are one clear error, exit 1.
#include <gtest/gtest.h>

#include "cli/cli_util.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "kv_test_models.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm {
namespace {

using testing::Outcome;

// stdout, and stderr too unless `quiet`.
Outcome run(const std::string& args, bool quiet = false) {
  return testing::run(args, "", quiet);
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// `generate` succeeded and its first line is `want`, comma-separated.
void expect_prints_tokens(const Outcome& out, const std::vector<int32_t>& want) {
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output.substr(0, out.output.find('\n')), join(want));
}

// `generate` on random_d64 with `--kv-format <format>`, and with `--kv-config` of a file named
// `config_name` holding `config_json`, prints the tokens the runner gives in process with the same
// formats; `check_runner` inspects each runner.
void expect_kv_formats_generate_equal_runner(
    const std::string& format, const std::string& config_name, const std::string& config_json,
    const std::function<void(engine::Runner&)>& check_runner = nullptr) {
  const std::string dir = testing::kv_model_dir("random_d64");
  const std::vector<int32_t> prompt = testing::kv_model_prompt("random_d64");
  const std::string config = ::testing::TempDir() + "/" + config_name;
  std::ofstream(config) << config_json;
  for (const bool from_file : {false, true}) {
    auto model = models::load_model(dir);
    engine::RunnerConfig rc;
    rc.kv_memory_bytes = size_t{16} << 20;
    if (from_file) {
      rc.kv_formats = kv::load_kv_config(config);
    } else {
      rc.kv_format = kv::KvFormat::parse(format);
    }
    engine::Runner runner(*model, rc);
    if (check_runner) check_runner(runner);
    engine::GreedyOptions options;
    options.max_new_tokens = 12;
    const auto want = engine::generate_greedy(runner, {prompt}, options).tokens[0];
    const Outcome out = run("generate --model " + dir + " --prompt-tokens " + join(prompt) +
                                " --max-tokens 12 --kv-memory 16 " +
                                (from_file ? "--kv-config " + config : "--kv-format " + format),
                            true);
    ASSERT_NO_FATAL_FAILURE(expect_prints_tokens(out, want));
  }
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
  const Outcome out = run("generate --model " + testing::fixture_model_dir(fixture) +
                              " --prompt-tokens " + join(golden.prompt) +
                              " --max-tokens 24 --kv-memory 16 --max-kv-size 12 --kv-keep 2 "
                              "--kv-format bf16",
                          true);
  ASSERT_NO_FATAL_FAILURE(expect_prints_tokens(out, want));
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
  // head_dim 16: no MLX group size divides it.
  out = run(base + "--kv-format int8-g32");
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("head_dim 16 is not a multiple of the group size 32"),
            std::string::npos)
      << out.output;
  const std::string bad_config = ::testing::TempDir() + "/bad_kv_config.json";
  std::ofstream(bad_config) << R"({"layers": {"0": "int5-g64"}})";
  out = run(base + "--kv-config " + bad_config);
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("bad_kv_config.json layers.0"), std::string::npos) << out.output;
}

// `generate --kv-format int4-g64` (and a kv_config.json mixing formats) = the runner in process.
TEST(KvCli, AffineKvFormatsGenerateEqualsTheRunner) {
  expect_kv_formats_generate_equal_runner(
      "int4-g64", "mixed_kv_config.json",
      R"({"default": "int4-g64", "layers": {"1": "int8-g32"}})");
}

// `generate --kv-format turbo` (and a kv_config.json with a turbo layer) = the runner in process,
// and different from bf16 KV's run only through the quantization (the runner runs turbo too).
TEST(KvCli, TurboKvFormatsGenerateEqualsTheRunner) {
  ASSERT_NO_FATAL_FAILURE(expect_kv_formats_generate_equal_runner(
      "turbo", "turbo_kv_config.json", R"({"default": "turbo", "layers": {"1": "turbo:k4v3"}})",
      [](engine::Runner& runner) { EXPECT_TRUE(runner.cache().group(0).format.is_turbo()); }));
  const std::string dir = testing::kv_model_dir("random_d64");
  const Outcome bad =
      run("generate --model " + dir + " --prompt-tokens 3 --max-tokens 1 --kv-format turbo:k3v3");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("turbo:kXvY"), std::string::npos) << bad.output;
}

// `generate --kv-format int8-g64 --kv-quant-start 64` on the embedded model = the runner in process
// with kv_quant_start 64 (a prompt that crosses 64, then decode); bad values are clear errors.
TEST(KvCli, KvQuantStartGenerateEqualsTheRunner) {
  const std::string dir = std::string(RINGLM_MODELS_DIR) + "/ringlm-kjv-llama";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " is not there";
  std::vector<int32_t> prompt;
  for (int i = 0; i < 80; ++i) prompt.push_back(5 + (i * 53) % 900);
  auto model = models::load_model(dir);
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.kv_format = kv::KvFormat::parse("int8-g64");
  rc.kv_quant_start = 64;
  engine::Runner runner(*model, rc);
  ASSERT_EQ(runner.cache().num_groups(), 2);  // int8 and its bf16 companion
  engine::GreedyOptions options;
  options.max_new_tokens = 16;
  for (int64_t eos : model->config().eos_token_ids)  // generate stops at EOS
    options.stop_token_ids.push_back(static_cast<int32_t>(eos));
  const auto want = engine::generate_greedy(runner, {prompt}, options).tokens[0];
  const std::string base = "generate --model " + dir + " --prompt-tokens " + join(prompt) +
                           " --max-tokens 16 --kv-memory 16 ";
  ASSERT_NO_FATAL_FAILURE(
      expect_prints_tokens(run(base + "--kv-format int8-g64 --kv-quant-start 64", true), want));

  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--kv-format int8-g64 --kv-quant-start -1", "--kv-quant-start must be a position >= 0"},
           {"--kv-format int8-g64 --kv-quant-start abc", "expects an integer, got 'abc'"},
           {"--kv-format bf16 --kv-quant-start 64",
            "--kv-quant-start 64 needs a quantized KV format"},
           {"--kv-quant-start 64", "--kv-quant-start 64 needs a quantized KV format"}}) {
    const Outcome bad = run(base + flags);
    EXPECT_EQ(bad.exit_code, 1) << flags;
    EXPECT_NE(bad.output.find(message), std::string::npos) << flags << ": " << bad.output;
  }
}

}  // namespace
}  // namespace ringlm
