// Single-thread encode throughput over the tokenizer corpus, for comparison with HF tokenizers
// (tools/golden/tokenizer_goldens.py measures the same entries in the same way: best of N passes,
// one encode(text, add_special_tokens=false) call per corpus entry).
//   tokenizer_bench --corpus tests/fixtures/tokenizer/corpus [--repeats 3] DIR [NAME=DIR ...]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "../tests/tokenizer/corpus.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  std::string corpus_dir = "tests/fixtures/tokenizer/corpus";
  int repeats = 3;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--corpus" && i + 1 < argc) {
      corpus_dir = argv[++i];
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else {
      specs.push_back(a);
    }
  }
  if (specs.empty()) {
    std::fprintf(stderr, "usage: tokenizer_bench [--corpus DIR] [--repeats N] DIR|NAME=DIR ...\n");
    return 2;
  }
  try {
    const auto corpus = ringlm::test::read_corpus(corpus_dir);
    size_t bytes = 0;
    for (const auto& e : corpus) bytes += e.bytes.size();
    std::printf("corpus: %zu entries, %zu bytes\n", corpus.size(), bytes);
    std::printf("%-14s %10s %10s %12s %12s\n", "tokenizer", "load_s", "MB/s", "tokens/s", "tokens");
    for (const auto& spec : specs) {
      const size_t eq = spec.find('=');
      const std::string dir = eq == std::string::npos ? spec : spec.substr(eq + 1);
      std::string name = eq == std::string::npos ? dir : spec.substr(0, eq);
      const auto t0 = std::chrono::steady_clock::now();
      const ringlm::Tokenizer tok = ringlm::Tokenizer::load(dir);
      const double load_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double best = 1e30;
      size_t ntok = 0;
      for (int r = 0; r < repeats; ++r) {
        const auto s = std::chrono::steady_clock::now();
        ntok = 0;
        for (const auto& e : corpus) ntok += tok.encode(e.bytes, false).size();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
      }
      std::printf("%-14s %10.3f %10.2f %12.0f %12zu\n", name.c_str(), load_s,
                  static_cast<double>(bytes) / best / 1e6, static_cast<double>(ntok) / best, ntok);
    }
  } catch (const ringlm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
