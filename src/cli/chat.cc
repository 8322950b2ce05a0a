// `ringlm chat`: an interactive conversation on stdin/stdout through the checkpoint's chat
// template, answers streamed as they are generated, through the Engine: greedy unless sampling
// flags are given, and each turn reuses the previous turns' KV from the prefix cache.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_run.h"
#include "cli/text_io.h"
#include "engine/engine.h"

namespace ringlm::cli {

int run_chat(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "max-tokens", "threads", "kv-memory", "gpu-memory-utilization",
             "max-step-tokens", "system", "kv-format", "kv-config", "kv-quant-start", "max-kv-size",
             "kv-keep", "device", "temperature", "top-p", "top-k", "min-p", "seed"});
  apply_threads(args);
  const std::string dir = args.required("model");
  auto model = models::load_model(dir, device_flag(args));
  const Tokenizer tokenizer = Tokenizer::load(dir);
  engine::EngineConfig config;
  config.runner = runner_config(args);
  config.eos_token_ids = stop_tokens(dir, tokenizer);
  engine::Engine engine(*model, tokenizer, config);
  const int64_t max_tokens = args.integer("max-tokens", 256);
  const engine::SamplingParams sampling = sampling_params(args, 0.0f);
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
    engine::Request request;
    request.prompt = encode_chat(tokenizer, messages, nlohmann::ordered_json::object());
    request.sampling = sampling;
    if (sampling.seed) request.sampling.seed = *sampling.seed + messages.size();
    // The answer gets what is left of the context, at most --max-tokens.
    const int64_t room = engine.max_model_len() - static_cast<int64_t>(request.prompt.size());
    RINGLM_USER_CHECK(room >= 1, "the conversation (", request.prompt.size(),
                      " tokens) fills the model's context of ", engine.max_model_len(), " tokens");
    request.stop.max_tokens = std::min(max_tokens, room);
    std::string answer;
    run_to_completion(engine, std::move(request), [&](const engine::Event& e) {
      answer += e.text;
      std::fputs(e.text.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputs("\n> ", stdout);
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
