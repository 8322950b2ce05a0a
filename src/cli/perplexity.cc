// `ringlm perplexity`: a model's next-token perplexity on held-out text, and what a KV format
// costs: with --reference-kv-format, the same text also runs with that KV format and the KL
// divergence of the next-token distributions (reference ‖ scored) and the top-1 agreement are
// reported. Texts longer than --context tokens are scored in consecutive segments of that many
// tokens.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "engine/text_score.h"
#include "tokenizer/tokenizer.h"

namespace ringlm::cli {

namespace {

// A .jsonl file gives one text per line (its "text" field); any other file is one text.
std::vector<std::string> read_texts(const std::string& path) {
  std::ifstream in(path);
  RINGLM_USER_CHECK(in.good(), "cannot read --text-file ", path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string content = all.str();
  std::vector<std::string> texts;
  if (path.size() > 6 && path.substr(path.size() - 6) == ".jsonl") {
    std::istringstream lines(content);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
      ++number;
      if (line.empty()) continue;
      const auto json = nlohmann::json::parse(line, nullptr, false);
      RINGLM_USER_CHECK(!json.is_discarded() && json.contains("text") && json["text"].is_string(),
                        path, ":", number, ": expected a JSON object with a \"text\" string");
      texts.push_back(json["text"].get<std::string>());
    }
  } else {
    texts.push_back(content);
  }
  return texts;
}

engine::RunnerConfig format_config(engine::RunnerConfig config, const std::string& format) {
  config.kv_format = kv::KvFormat::parse(format);
  config.kv_format_auto = false;
  config.kv_formats = {};
  return config;
}

}  // namespace

int run_perplexity(int argc, char** argv) {
  Args args(
      argc, argv,
      {"model", "text-file", "prompt-tokens", "context", "max-texts", "kv-format", "kv-config",
       "reference-kv-format", "kv-memory", "max-step-tokens", "threads", "json", "device"},
      {"json"});
  apply_threads(args);
  const std::string dir = args.required("model");
  auto model = models::load_model(dir, device_flag(args));
  std::vector<std::vector<int32_t>> sequences;
  if (args.has("prompt-tokens")) {
    sequences = parse_prompts(args.str("prompt-tokens"), model->vocab_size());
  } else {
    const Tokenizer tokenizer = Tokenizer::load(dir);
    auto texts = read_texts(args.required("text-file"));
    const int64_t max_texts = args.integer("max-texts", static_cast<int64_t>(texts.size()));
    RINGLM_USER_CHECK(max_texts >= 1, "--max-texts must be at least 1");
    if (static_cast<int64_t>(texts.size()) > max_texts)
      texts.resize(static_cast<size_t>(max_texts));
    for (const auto& text : texts) sequences.push_back(tokenizer.encode(text));
  }
  const int64_t context =
      args.integer("context", std::min<int64_t>(model->config().max_position_embeddings, 1024));
  RINGLM_USER_CHECK(context >= 2, "--context must be at least 2");

  engine::RunnerConfig config = runner_config(args);
  config.max_sequences = 1;
  // One sequence of --context tokens (and a reference runner beside it): the fixed budget.
  config.kv_memory_auto = false;
  engine::Runner runner(*model, config);
  std::unique_ptr<engine::Runner> reference;
  if (args.has("reference-kv-format"))
    reference = std::make_unique<engine::Runner>(
        *model, format_config(config, args.str("reference-kv-format")));

  engine::TextScore total;
  int64_t segments = 0;
  for (const auto& tokens : sequences) {
    for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(context)) {
      const size_t end = std::min(tokens.size(), start + static_cast<size_t>(context));
      const std::vector<int32_t> segment(tokens.begin() + static_cast<int64_t>(start),
                                         tokens.begin() + static_cast<int64_t>(end));
      total.add(engine::score_tokens(runner, reference.get(), segment));
      ++segments;
    }
  }
  std::string formats;
  for (int g = 0; g < runner.cache().num_groups(); ++g) {
    const std::string name = runner.cache().group(g).format.name();
    if (formats.find(name) == std::string::npos) formats += (formats.empty() ? "" : ",") + name;
  }
  nlohmann::json out = {
      {"model", dir},
      {"kv_format", formats},
      {"segments", segments},
      {"positions", total.positions},
      {"mean_nll", total.positions ? total.nll_sum / static_cast<double>(total.positions) : 0.0},
      {"perplexity", total.perplexity()}};
  if (reference) {
    out["reference_kv_format"] = args.str("reference-kv-format");
    out["mean_kl"] = total.mean_kl();
    out["max_kl"] = total.kl_max;
    out["top1_agreement"] = total.positions ? static_cast<double>(total.top1_agree) /
                                                  static_cast<double>(total.positions)
                                            : 0.0;
  }
  if (args.has("json")) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("kv %s: perplexity %.4f over %lld positions (%lld segments)", formats.c_str(),
                total.perplexity(), static_cast<long long>(total.positions),
                static_cast<long long>(segments));
    if (reference) {
      std::printf("; vs %s KV: mean KL %.3g, max KL %.3g, top-1 agreement %.2f %%",
                  args.str("reference-kv-format").c_str(), total.mean_kl(), total.kl_max,
                  100.0 * out["top1_agreement"].get<double>());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace ringlm::cli
