// Text through the binary: tokenize, generate --prompt and chat on a checkpoint made of a real
// tokenizer (npm qwen3) and a random qwen3-shaped model whose vocabulary covers it. The oracle is
// the library path the tests elsewhere check against Hugging Face: chat template rendering, encode,
// greedy generation, decode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_util.h"
#include "engine/runner.h"
#include "models/model.h"
#include "tokenizer/golden_util.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ringlm {
namespace {

using testing::join;
using testing::run;

// A tiny random qwen3 model next to the npm qwen3 tokenizer, made once per test process.
const std::string& chat_model_dir() {
  static const std::string dir = [] {
    const auto path =
        std::filesystem::temp_directory_path() / ("ringlm_text_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(test::tokenizer_dir("qwen3") + "/" + f, path / f,
                                 std::filesystem::copy_options::overwrite_existing);
    }
    std::ofstream(path / "model_config.json") << R"({"model_type": "qwen3", "hidden_size": 32,
      "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 2,
      "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 151936, "tie_word_embeddings": true,
      "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "eos_token_id": 151645})";
    const auto made = run("random-model --config " + (path / "model_config.json").string() +
                          " --out " + path.string() + " --seed 7");
    EXPECT_EQ(made.exit_code, 0) << made.output;
    return path.string();
  }();
  return dir;
}

// What the engine library generates (greedy) for these prompt ids, decoded as text.
std::string library_completion(const std::vector<int32_t>& prompt, int64_t max_tokens,
                               const Tokenizer& tokenizer) {
  auto model = models::load_model(chat_model_dir());
  engine::Runner runner(*model, engine::RunnerConfig{});
  engine::GreedyOptions options;
  options.max_new_tokens = max_tokens;
  options.stop_token_ids = {151645, tokenizer.eos_id()};
  const auto result = engine::generate_greedy(runner, {prompt}, options);
  return tokenizer.decode(result.tokens.at(0), /*skip_special_tokens=*/true);
}

TEST(TextCli, TokenizePrintsTheTokenizersIds) {
  if (!test::have_tokenizer("qwen3")) GTEST_SKIP() << test::kNpmMissing;
  const std::string text = "Hello, wörld! 123 <|im_start|>";
  const auto out =
      run("tokenize --model " + test::tokenizer_dir("qwen3") + " --text '" + text + "'");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output, join(test::cached_tokenizer("qwen3").encode(text)) + "\n");
}

TEST(TextCli, GeneratePromptStreamsWhatTheLibraryDecodes) {
  if (!test::have_tokenizer("qwen3")) GTEST_SKIP() << test::kNpmMissing;
  const Tokenizer& tokenizer = test::cached_tokenizer("qwen3");
  const std::string prompt = "The quick brown fox";
  const auto out =
      run("generate --model " + chat_model_dir() + " --max-tokens 12 --prompt '" + prompt + "'", "",
          /*stdout_only=*/true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output, library_completion(tokenizer.encode(prompt), 12, tokenizer) + "\n");
}

TEST(TextCli, ChatRendersTheTemplateAndStreamsTheAnswer) {
  if (!test::have_tokenizer("qwen3")) GTEST_SKIP() << test::kNpmMissing;
  const Tokenizer& tokenizer = test::cached_tokenizer("qwen3");
  jinja::ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hi there"}}});
  in.add_generation_prompt = true;
  in.special_tokens = {{"eos_token", "<|im_end|>"}};
  const std::string rendered = jinja::render_chat(*tokenizer.chat_template(), in);
  ASSERT_NE(rendered.find("<|im_start|>assistant"), std::string::npos) << rendered;
  const std::string answer =
      library_completion(tokenizer.encode(rendered, /*add_special_tokens=*/false), 10, tokenizer);
  const auto out = run("chat --model " + chat_model_dir() + " --max-tokens 10", "Hi there\n",
                       /*stdout_only=*/true);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output, "> " + answer + "\n> \n");
}

}  // namespace
}  // namespace ringlm
