// The ringlm binary on MLX-quantized checkpoints: inspect reports the quantization and the logical
// parameter count, generate on a quantized fixture prints its dequantized twin's tokens, and
// random-model --quantize writes a checkpoint that loads and runs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "models/golden_util.h"

namespace ringlm {
namespace {

using testing::Outcome;
using testing::run;

nlohmann::json inspect_json(const std::string& dir) {
  const Outcome out = run("inspect " + dir + " --json", "", /*stdout_only=*/true);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  return nlohmann::json::parse(out.output);
}

TEST(QuantizedCli, InspectReportsTheQuantization) {
  const auto q = inspect_json(testing::fixture_model_dir("llama3_mlx"));
  const auto dense = inspect_json(testing::fixture_model_dir("llama3"));
  ASSERT_TRUE(q.contains("quantization")) << q.dump();
  EXPECT_EQ(q["quantization"]["mode"], "affine");
  EXPECT_EQ(q["quantization"]["bits"], 4);
  EXPECT_EQ(q["quantization"]["group_size"], 64);
  // 3 layers × 7 matrices + embedding + head, less the two dense down_proj and the v_proj
  // override: 20.
  EXPECT_EQ(q["quantization"]["quantized_modules"], 20);
  EXPECT_EQ(q["quantization"]["overrides"]["model.layers.2.self_attn.v_proj"], false);
  EXPECT_EQ(q["quantization"]["overrides"]["model.layers.1.mlp.down_proj"]["bits"], 8);
  EXPECT_EQ(q["parameters"], dense["parameters"]);  // logical values, not code words
  EXPECT_FALSE(dense.contains("quantization"));
  const Outcome text = run("inspect " + testing::fixture_model_dir("llama3_mlx"));
  EXPECT_NE(text.output.find("quantization MLX affine 4-bit, group 64, 20 modules quantized"),
            std::string::npos)
      << text.output;
}

TEST(QuantizedCli, GenerateOnAQuantizedCheckpointGivesItsTwinsTokens) {
  const std::string prompt = " --prompt-tokens 5,9,300,17,42,7 --max-tokens 12";
  // stdout is the generated ids (the timing line goes to stderr).
  const Outcome q =
      run("generate --model " + testing::fixture_model_dir("gemma3_mlx") + prompt, "", true);
  const Outcome d =
      run("generate --model " + testing::fixture_model_dir("gemma3_mlx_dense") + prompt, "", true);
  ASSERT_EQ(q.exit_code, 0) << q.output;
  ASSERT_EQ(d.exit_code, 0) << d.output;
  ASSERT_FALSE(q.output.empty());
  EXPECT_EQ(q.output, d.output);
}

TEST(QuantizedCli, RandomModelWritesAnMlxQuantizedCheckpoint) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ringlm_cli_quant_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "small.json") << R"({"model_type": "qwen3", "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 300, "tie_word_embeddings": true,
    "rope_theta": 10000.0, "rms_norm_eps": 1e-6})";
  const std::string out = (dir / "q8").string();
  const Outcome made = run("random-model --config " + (dir / "small.json").string() + " --out " +
                           out + " --quantize 8 --group-size 32");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const auto q = inspect_json(out);
  EXPECT_EQ(q["quantization"]["bits"], 8);
  EXPECT_EQ(q["quantization"]["group_size"], 32);
  EXPECT_EQ(q["quantization"]["quantized_modules"], 1 + 2 * 7);  // tied: no separate head
  const Outcome gen = run("generate --model " + out + " --prompt-tokens 1,2,3 --max-tokens 4");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  const Outcome bad = run("random-model --config " + (dir / "small.json").string() + " --out " +
                          out + " --quantize 8 --group-size 128");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("not a multiple of --group-size 128"), std::string::npos) << bad.output;
  std::filesystem::remove_all(dir);
}

// The gemma3_text tensor list (q/k norms, feed-forward pre/post norms, tied head) loads and runs,
// with the same sliding/global layer pattern as the gemma-3-12b preset, at a small size.
TEST(QuantizedCli, RandomModelWritesALoadableGemma3) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ringlm_cli_gemma_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "small.json") << R"({"model_type": "gemma3_text", "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 6, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 300, "tie_word_embeddings": true,
    "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 32,
    "sliding_window": 8, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}})";
  const std::string out = (dir / "g").string();
  const Outcome made =
      run("random-model --config " + (dir / "small.json").string() + " --out " + out);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const auto info = inspect_json(out);
  EXPECT_EQ(info["model_type"], "gemma3_text");
  const Outcome gen =
      run("generate --model " + out + " --prompt-tokens 1,2,3,4,5,6,7,8,9,10,11,12 --max-tokens 8");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringlm
