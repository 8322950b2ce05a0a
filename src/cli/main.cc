// ringlm: the command-line entry point. Errors reach the user as one line, exit code 1.
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

namespace {

void usage() {
  std::fputs(
      "usage: ringlm <command> [flags]\n"
      "  serve MODEL_DIR [--host H] [--port N] [--api-key K] [...]       OpenAI/Anthropic HTTP "
      "server\n"
      "  generate --model DIR (--prompt TEXT | --prompt-tokens 1,2,3[;4,5]) [--max-tokens N]\n"
      "    [--temperature T --top-p P --top-k K --min-p M --seed S --n N] greedy, or sampled\n"
      "                                                                (text prompts)\n"
      "  chat --model DIR [--system TEXT] [--max-tokens N]             interactive chat (stdin)\n"
      "    [--temperature T --top-p P --top-k K --min-p M --seed S]    (greedy by default)\n"
      "  tokenize --model DIR --text TEXT [--no-special]               print token ids\n"
      "  inspect DIR [--json]                                          describe a checkpoint\n"
      "  bench --model DIR [--prompt-len N] [--gen N] [--batch N]       prefill/decode speed\n"
      "  perplexity --model DIR --text-file F [--kv-format F]          held-out perplexity, and\n"
      "    [--reference-kv-format bf16] [--context N]                  KL vs another KV format\n"
      "  random-model --preset NAME --out DIR [--dtype bf16]           random-weight checkpoint\n"
      "               [--quantize 4|8 [--group-size 64]]               (MLX affine-quantized)\n"
      "common flags: --threads N (default: all cores), --device cpu|cuda\n",
      stderr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const char* command = argv[1];
  try {
    if (std::strcmp(command, "serve") == 0) return ringlm::cli::run_serve(argc - 2, argv + 2);
    if (std::strcmp(command, "generate") == 0) return ringlm::cli::run_generate(argc - 2, argv + 2);
    if (std::strcmp(command, "chat") == 0) return ringlm::cli::run_chat(argc - 2, argv + 2);
    if (std::strcmp(command, "tokenize") == 0) return ringlm::cli::run_tokenize(argc - 2, argv + 2);
    if (std::strcmp(command, "inspect") == 0) return ringlm::cli::run_inspect(argc - 2, argv + 2);
    if (std::strcmp(command, "bench") == 0) return ringlm::cli::run_bench(argc - 2, argv + 2);
    if (std::strcmp(command, "perplexity") == 0) {
      return ringlm::cli::run_perplexity(argc - 2, argv + 2);
    }
    if (std::strcmp(command, "random-model") == 0) {
      return ringlm::cli::run_random_model(argc - 2, argv + 2);
    }
    std::fprintf(stderr, "ringlm: unknown command '%s'\n", command);
    usage();
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlm %s: error: %s\n", command, e.what());
    return 1;
  }
}
