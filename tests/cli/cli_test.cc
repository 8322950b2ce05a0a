// The ringlm binary end to end: generate equals the transformers greedy golden, inspect reads only
// headers, and bad input gives one clear error line and exit code 1.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "models/golden_util.h"

namespace ringlm {
namespace {

using testing::join;
using testing::lines;
using testing::Outcome;
using testing::run;

// Peak RSS (KiB) of one run of the binary with `args`, output discarded; -1 if it failed.
long peak_rss_kib(const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage = {RINGLM_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = posix_spawn(&pid, RINGLM_BINARY, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  return usage.ru_maxrss;
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("ringlm_cli_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Cli, GenerateGivesTheGoldenGreedyTokens) {
  for (const std::string name : {"llama3", "qwen2"}) {
    const auto golden = testing::load_golden(name);
    const Outcome out =
        run("generate --model " + testing::fixture_model_dir(name) + " --prompt-tokens " +
            join(golden.prompt) + " --max-tokens " + std::to_string(golden.greedy.size()));
    ASSERT_EQ(out.exit_code, 0) << out.output;
    const auto printed = lines(out.output);
    EXPECT_NE(std::find(printed.begin(), printed.end(), join(golden.greedy)), printed.end())
        << out.output;
  }
}

TEST(Cli, InspectDescribesTheCheckpoint) {
  const Outcome out = run("inspect " + testing::fixture_model_dir("qwen3") + " --json");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("\"model_type\": \"qwen3\""), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("\"parameters\": 230208"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("\"supported\": true"), std::string::npos) << out.output;
}

// A 64 GiB checkpoint whose data is a hole: inspect must answer from the header alone.
TEST(Cli, InspectIsLazyOnACheckpointLargerThanMemory) {
  const auto dir = temp_dir("sparse");
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 65536,
    "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 262144})";
  const uint64_t rows = 262144, cols = 65536, bytes = rows * cols * 4;  // 64 GiB of F32
  std::string header =
      R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[262144,65536],"data_offsets":[0,)" +
      std::to_string(bytes) + "]}}";
  while (header.size() % 8 != 0) header += ' ';
  const auto path = dir / "model.safetensors";
  {
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
  }
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(8 + header.size() + bytes)), 0);
  const Outcome out = run("inspect " + dir.string() + " --json");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("\"bytes\": " + std::to_string(bytes)), std::string::npos)
      << out.output;
  const long rss = peak_rss_kib({"inspect", dir.string()});
  EXPECT_GT(rss, 0);
  EXPECT_LT(rss, 64 * 1024) << "peak RSS in KiB";  // 64 MiB: nothing of the 64 GiB was read
  std::filesystem::remove_all(dir);
}

TEST(Cli, UnknownModelTypeListsTheSupportedOnes) {
  const auto dir = temp_dir("unknown");
  std::filesystem::copy(testing::fixture_model_dir("llama3"), dir,
                        std::filesystem::copy_options::recursive);
  std::ofstream(dir / "config.json") << R"({"model_type": "frobnicator", "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 8})";
  const Outcome out = run("generate --model " + dir.string() + " --prompt-tokens 1,2");
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("unsupported model_type 'frobnicator'"), std::string::npos)
      << out.output;
  EXPECT_NE(out.output.find("gemma2, gemma3_text, llama, mistral, qwen2, qwen3"), std::string::npos)
      << out.output;
  std::filesystem::remove_all(dir);
}

// `bench --context` writes each row's synthetic context in steps, as a chunked prefill does: the
// sliding layers hold their window per row, not the whole context, so rows fit as long as the
// sliding pools' per-row promise (window + one step) does. The gemma3 fixture: 4 sliding layers
// (window 16) and 2 full ones; at this budget the 8 rows of 900 tokens fit only bounded.
constexpr int kBenchKvMiB = 24;
TEST(Cli, BenchAtContextKeepsSlidingLayersBounded) {
  const Outcome out = run("bench --model " + testing::fixture_model_dir("gemma3") +
                              " --context 900 --batch 8 --gen 2 --repeat 1 --kv-memory " +
                              std::to_string(kBenchKvMiB) + " --json",
                          "", /*stdout_only=*/true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  const auto result = nlohmann::json::parse(out.output.substr(out.output.find('{')));
  EXPECT_EQ(result.at("batch").get<int>(), 8);
  EXPECT_GT(result.at("decode_tok_s").get<double>(), 0.0);
  EXPECT_LT(result.at("kv_resident_bytes").get<double>(),
            result.at("kv_full_attention_bytes").get<double>() / 2);
}

// `bench --context` counts the FLOPs a decode step must do — 2 per projection weight (q, k, v,
// o, gate, up, down in each layer, and the LM head) and 4 per q width per key a query sees, the
// sliding layers' keys bounded by their window — and with peaks given, its share of the roofline:
// the longer of its bytes and its FLOPs at those peaks over the step's time. The gemma3 fixture
// (hidden 64, intermediate 128, 4 q / 2 kv heads of 32, vocab 512, 4 sliding layers of window
// 16 and 2 full ones) at context 900, 2 rows.
TEST(Cli, BenchAtContextCountsFlopsAndTheRoofline) {
  const Outcome out =
      run("bench --model " + testing::fixture_model_dir("gemma3") +
              " --context 900 --batch 2 --gen 2 --repeat 1 --kv-memory " +
              std::to_string(kBenchKvMiB) + " --peak-gb-s 50 --peak-tflop-s 2 --json",
          "", /*stdout_only=*/true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  const auto r = nlohmann::json::parse(out.output.substr(out.output.find('{')));
  const double weights_per_layer = 64.0 * (2 * 128 + 2 * 64) + 3 * 64.0 * 128;
  const double weights = 6 * weights_per_layer + 64.0 * 512;
  const double keys = 4 * 16 + 2 * 901;  // per row, over the layers
  const double flops = 2 * (2 * weights + 4 * 128 * keys);
  EXPECT_DOUBLE_EQ(r.at("flops_per_step").get<double>(), flops);
  const double step_s = r.at("step_ms").get<double>() * 1e-3;
  EXPECT_NEAR(r.at("achieved_tflop_s").get<double>(), flops / step_s / 1e12, 1e-12);
  const double roofline_s = std::max(r.at("bytes_per_step").get<double>() / 50e9, flops / 2e12);
  EXPECT_NEAR(r.at("roofline_step_ms").get<double>(), roofline_s * 1e3, 1e-9);
  EXPECT_NEAR(r.at("of_roofline").get<double>(), roofline_s / step_s, 1e-9);
}

TEST(Cli, BadInputGivesAClearError) {
  const std::string model = testing::fixture_model_dir("llama3");
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"generate --model /nonexistent/dir --prompt-tokens 1", "/nonexistent/dir"},
      {"generate --model " + model + " --prompt-tokens 1,x", "'x' is not a token id"},
      {"generate --model " + model + " --prompt-tokens 99999", "out of range"},
      {"generate --model " + model + " --prompt-tokens 1 --max-tokens 0", "max_new_tokens"},
      {"generate --model " + model + " --bogus 1", "unknown flag --bogus"},
      {"generate --model " + model, "give exactly one of --prompt TEXT and --prompt-tokens IDS"},
      {"frobnicate", "unknown command"},
      {"bench --model " + model + " --decode-parts 64", "--decode-parts needs --device cuda"},
      {"bench --model " + model + " --context 8 --peak-gb-s -1 --peak-tflop-s 1",
       "--peak-gb-s and --peak-tflop-s must not be negative"},
      {"generate --model " + model + " --prompt-tokens 1 --gpu-memory-utilization 1.5",
       "--gpu-memory-utilization must be in (0, 1]"},
      {"generate --model " + model + " --prompt-tokens 1 --gpu-memory-utilization 0",
       "--gpu-memory-utilization must be in (0, 1]"},
  };
  for (const auto& c : cases) {
    const Outcome out = run(c.args);
    EXPECT_NE(out.exit_code, 0) << c.args;
    EXPECT_NE(out.output.find(c.expect), std::string::npos) << c.args << "\n" << out.output;
  }
}

}  // namespace
}  // namespace ringlm
