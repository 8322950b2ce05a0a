// `ringlm chat`: an interactive conversation on stdin/stdout through the checkpoint's chat
// template, answers streamed as they are generated (greedy).
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/text_io.h"
#include "tokenizer/detokenizer.h"

namespace ringlm::cli {

int run_chat(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "max-tokens", "threads", "kv-memory", "max-step-tokens", "system",
             "kv-format", "kv-config", "kv-quant-start", "max-kv-size", "kv-keep", "device"});
  apply_threads(args);
  const std::string dir = args.required("model");
  auto model = models::load_model(dir, device_flag(args));
  const Tokenizer tokenizer = Tokenizer::load(dir);
  engine::Runner runner(*model, runner_config(args));
  engine::GreedyOptions options;
  options.max_new_tokens = args.integer("max-tokens", 256);
  options.stop_token_ids = stop_tokens(dir, tokenizer);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (args.has("system")) messages.push_back({{"role", "system"}, {"content", args.str("system")}});
  std::string line;
  std::fputs("> ", stdout);
  std::fflush(stdout);
  while (std::getline(std::cin, line)) {
    if (line.empty()) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    const auto prompt = encode_chat(tokenizer, messages, nlohmann::ordered_json::object());
    IncrementalDetokenizer detok(tokenizer, /*skip_special_tokens=*/true);
    std::string answer;
    options.on_token = [&](size_t, int32_t token) {
      const std::string piece = detok.push(token);
      answer += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
    engine::generate_greedy(runner, {prompt}, options);
    const std::string rest = detok.flush();
    answer += rest;
    std::printf("%s\n> ", rest.c_str());
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", answer}});
  }
  std::fputs("\n", stdout);
  return 0;
}

int run_tokenize(int argc, char** argv) {
  Args args(argc, argv, {"model", "text", "no-special"}, {"no-special"});
  const Tokenizer tokenizer = Tokenizer::load(args.required("model"));
  const auto ids = tokenizer.encode(args.required("text"), !args.has("no-special"));
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace ringlm::cli
